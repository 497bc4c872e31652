"""Redis Cluster: the suite's 3-master cluster fixture and the ``redis+cluster://`` URL.

The cluster is real (three redis-server processes with ``cluster-enabled yes``); the other
cluster tests are the core and trace tests parametrized with ``topology="cluster"``.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests import actors

from tracebus.engine.cluster_client import client_for, cluster_seeds, is_cluster
from tests.redis_server import free_port
from tracebus.engine.errors import BrokerConnectionError, UnsupportedRedis


def test_the_fixture_starts_three_masters_that_share_every_slot(redis_cluster):
    redis_cluster.flushall()
    client = client_for(redis_cluster.url)
    try:
        assert is_cluster(client)
        primaries = client.get_primaries()
        assert len(primaries) == 3
        for i in range(300):  # keys spread over every master
            client.set(f"spread:{i}", i)
        held = [c.dbsize() for c in redis_cluster.node_clients()]
        assert all(n > 50 for n in held) and sum(held) == 300, held
    finally:
        redis_cluster.flushall()
        client.close()


def test_cluster_urls_name_their_seed_nodes():
    assert cluster_seeds("redis+cluster://a:7000,b:7001") == [("a", 7000), ("b", 7001)]
    assert cluster_seeds("redis+cluster://user:pw@a:7000/0") == [("a", 7000)]


@pytest.mark.parametrize("url", ["redis+cluster://", "redis+cluster://a", "redis+cluster://a:x",
                                 "redis+cluster://a:7000/3"])
def test_a_bad_cluster_url_is_refused_with_a_message(url):
    with pytest.raises(UnsupportedRedis, match="redis\\+cluster"):
        cluster_seeds(url)


@pytest.mark.parametrize("topology", ["cluster"], indirect=True)
def test_a_worker_on_a_cluster_drains_two_queues_on_different_shards(supervisor):
    # Given two queues whose streams hash to different masters
    pool = supervisor("--queues", "tests,other", processes=2)
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    assert client.keyslot(broker.keys.stream("tests")) != client.keyslot(broker.keys.stream("other"))
    # When messages are sent to both
    messages = [actors.record.message((n,)) for n in range(200)]
    broker.enqueue_many([m if n % 2 else dataclasses.replace(m, queue_name="other")
                         for n, m in enumerate(messages)])
    # Then every one runs once and both queues are left empty
    pool.wait(lambda: client.hlen(f"{prefix}:test:runs") == 200, 30, "200 messages to run")
    assert set(client.hvals(f"{prefix}:test:runs")) == {b"1"}
    for queue in ("tests", "other"):
        pool.wait(lambda: broker.queue_stats(queue)["length"] + broker.queue_stats(queue)["pending"] == 0,
                  10, f"queue {queue} drained")
    stats = broker.stats()
    assert stats["processed:tests"] == stats["processed:other"] == 100


def test_a_cluster_with_no_seed_answering_is_a_connection_error():
    with pytest.raises(BrokerConnectionError, match="Redis unreachable"):
        client_for(f"redis+cluster://127.0.0.1:{free_port()}", socket_connect_timeout=1)
