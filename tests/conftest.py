"""Shared fixtures: a private redis-server for the whole session, a clean database per test.

A test parametrized over the ``topology`` fixture (``indirect=True``) runs on each Redis
topology it names: ``single`` (the default: the session's redis-server), ``sentinel`` (a
primary, a replica and three sentinels) or ``cluster`` (a 3-master Redis Cluster); the
sentinel group and the cluster are started once, on first use, and emptied per test.
``tests.topology.ON_NODE_AND_CLUSTER`` runs a test on ``single`` and ``cluster``.
"""

from __future__ import annotations

import pytest
from api.settings import ApiSettings
from tests.redis_server import RedisServer, SentinelGroup
from tracebus.engine.connection import redis_client as connect_url
from tracebus.redis_cluster_proc import RedisClusterServers

#: The topologies the end-to-end tests run on (``topology`` fixture).
TOPOLOGIES = ["single", "sentinel"]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except RuntimeError as e:  # absence of Redis is a failure, never a skip
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sentinel_group(tmp_path_factory):
    """A Sentinel group (primary, replica, three sentinels), started by the first test that
    runs on the ``sentinel`` topology."""
    try:
        group = SentinelGroup(tmp_path_factory.mktemp("sentinel")).start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield group
    group.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    try:
        cluster = RedisClusterServers(tmp_path_factory.mktemp("cluster")).start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield cluster
    cluster.stop()


@pytest.fixture
def topology(request) -> str:
    """``single`` unless a test is parametrized over it:
    ``@pytest.mark.parametrize("topology", TOPOLOGIES, indirect=True)`` or ``@ON_NODE_AND_CLUSTER``."""
    return getattr(request, "param", "single")


@pytest.fixture
def redis_url(request, topology, redis_server) -> str:
    if topology == "sentinel":
        return request.getfixturevalue("sentinel_group").url
    if topology == "cluster":
        return request.getfixturevalue("redis_cluster").url
    return redis_server.url


@pytest.fixture
def redis_client(redis_url, topology, request):
    client = connect_url(redis_url)
    if topology == "cluster":
        request.getfixturevalue("redis_cluster").flushall()  # FLUSHDB on a cluster client reaches one node
    else:
        client.flushdb()
    yield client
    client.close()


@pytest.fixture
def settings(redis_client, redis_url, tmp_path) -> ApiSettings:
    """ApiSettings pointing at the test Redis, with short timeouts suited to tests."""
    return ApiSettings.from_env({}, redis_url=redis_url, key_prefix="tbtest",
                             claim_min_idle_ms=2000, block_ms=200, heartbeat_timeout_s=10,
                             graceful_timeout_s=10)


@pytest.fixture(scope="session")
def forked_cli():
    """``forked_cli.run(*argv, cwd=, env=)`` / ``.cli(*argv, env=)``: ``python -m tracebus`` as real
    processes forked from one server that has imported the CLI (:class:`tests.clitools.ForkedCli`)."""
    from tests.clitools import ForkedCli

    cli = ForkedCli()
    yield cli
    cli.close()


from tests.conftest_proc import broker, supervisor, worker  # noqa: E402,F401  (core-engine fixtures)
from tests.conftest_data import sample_db  # noqa: F401,E402
from tests.postgres_server import postgres_sample, postgres_server  # noqa: F401,E402  (private PostgreSQL)
from tests.conftest_trace import big_cids, big_db, big_expected, big_trace  # noqa: F401,E402  (trace jobs)
from tests.conftest_order import pytest_collection_modifyitems  # noqa: F401,E402  (xdist: longest files first)
