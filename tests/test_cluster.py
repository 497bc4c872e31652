"""Redis Cluster: the suite's 3-master cluster fixture and the ``redis+cluster://`` URL.

The cluster is real (three redis-server processes with ``cluster-enabled yes``); the other
cluster tests are the core and trace tests parametrized with ``topology="cluster"``.
"""

from __future__ import annotations

import pytest

from tracebus.engine.cluster_client import client_for, cluster_seeds, is_cluster
from tracebus.engine.errors import UnsupportedRedis


def test_the_fixture_starts_three_masters_that_share_every_slot(redis_cluster):
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
