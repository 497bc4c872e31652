"""Shared fixtures: a private redis-server for the whole session, a clean database per test.

A test parametrized with ``@pytest.mark.parametrize("topology", ["node", "cluster"],
indirect=True)`` runs on the one node and on a 3-master Redis Cluster (started once, on
first use, and emptied per test).
"""

from __future__ import annotations

import pytest
import redis

from api.settings import ApiSettings
from tests.redis_server import RedisServer
from tracebus.engine.cluster_client import client_for
from tracebus.redis_cluster_proc import RedisClusterServers


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except RuntimeError as e:  # absence of Redis is a failure, never a skip
        pytest.fail(str(e))
    yield server
    server.stop()


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
    """``node`` unless the test is parametrized (indirect) with ``cluster``."""
    return getattr(request, "param", "node")


@pytest.fixture
def redis_url(topology, request) -> str:
    return request.getfixturevalue("redis_cluster" if topology == "cluster" else "redis_server").url


@pytest.fixture
def redis_client(redis_url, topology, request):
    if topology == "cluster":
        request.getfixturevalue("redis_cluster").flushall()
        client = client_for(redis_url)
    else:
        client = redis.Redis.from_url(redis_url)
        client.flushdb()
    yield client
    client.close()


@pytest.fixture
def settings(redis_client, redis_url, tmp_path) -> ApiSettings:
    """ApiSettings pointing at the test Redis, with short timeouts suited to tests."""
    return ApiSettings.from_env({}, redis_url=redis_url, key_prefix="tbtest",
                             claim_min_idle_ms=2000, block_ms=200, heartbeat_timeout_s=10,
                             graceful_timeout_s=10)
from tests.conftest_proc import broker, supervisor, worker  # noqa: E402,F401  (core-engine fixtures)
from tests.conftest_data import sample_db  # noqa: F401
from tests.conftest_trace import big_cids, big_db, big_expected, big_trace  # noqa: F401  (trace jobs)
