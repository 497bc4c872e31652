"""Redis Cluster: the suite's 3-master cluster fixture and the ``redis+cluster://`` URL.

The cluster is real (three redis-server processes with ``cluster-enabled yes``); the other
cluster tests are the core and trace tests parametrized with ``topology="cluster"``.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests import actors

from tracebus.engine.cluster_client import cluster_seeds, is_cluster
from tracebus.engine import connection
from tests.redis_server import free_port
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.engine.errors import BrokerConnectionError, UnsupportedRedis


def test_the_fixture_starts_three_masters_that_share_every_slot(redis_cluster):
    redis_cluster.flushall()
    client = connection.redis_client(redis_cluster.url)
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
        connection.redis_client(f"redis+cluster://127.0.0.1:{free_port()}", socket_connect_timeout=1)


def test_the_keys_each_script_touches_share_one_slot_and_result_chunks_spread():
    from redis.crc import key_slot

    from tracebus.engine.keys import Keys
    from tracebus.jobs.keys import JobKeys

    def slots(*keys):
        return {key_slot(k.encode()) for k in keys}

    q, k, job = Keys("tb"), JobKeys("tb"), "trace-evt-0123456789abcdef01234567"
    # a queue's scripts and its ack MULTI
    assert len(slots(q.stream("a"), q.delayed("a"), q.dead("a"), q.stats("a"))) == 1
    # every job script, the fenced write and the commit
    assert len(slots(k.job(job), k.job_units(job), k.job_todo(job), k.job_inputs(job), k.job_progress(job),
                     k.job_manifest(job, "history"), k.job_partials(job), k.job_artifact(job, "x"))) == 1
    # admission, and the system-wide figures
    assert len(slots(k.user_jobs("alice"), k.singleflight("fp", "alice"))) == 1
    assert len(slots(k.stats(), k.jobs_index(), *(k.jobs_by_status(s) for s in ("queued", "failed")))) == 1
    # one job's 580 unit results land on hundreds of slots, none of them the job's own
    chunks = slots(*(k.job_chunk(job, "history", unit, 0, 1) for unit in range(580)))
    assert len(chunks) > 500 and key_slot(k.job(job).encode()) not in chunks
    # the parts of one unit attempt stay together (one unit's rows on one node)
    assert len(slots(*(k.job_chunk(job, "history", 7, part, 2) for part in range(10)))) == 1


def test_the_redis_settings_are_checked_on_every_master(redis_cluster):
    from tracebus.engine.redis_check import check_redis_config

    client = connection.redis_client(redis_cluster.url)
    try:
        warnings = check_redis_config(client, redis_cluster.url)
    finally:
        client.close()
    # the fixture's masters run without AOF: one warning each, naming the master
    assert len(warnings) == 3 and all("appendonly no" in w for w in warnings), warnings
    assert {w.split(" has ")[0] for w in warnings} == {f"Redis at 127.0.0.1:{n.port}" for n in redis_cluster.nodes}


def _batches_over_two_queues(broker, slow_batch_s: float) -> list[int]:
    """Run 1,000 messages over two queues through one worker, batch by batch; the sizes."""
    import signal

    from tracebus.engine.slot import WorkerSlot
    from tracebus.engine.worker import Worker

    handler, timer = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    try:
        messages = [actors.record.message((n,)) for n in range(1000)]
        broker.enqueue_many([m if n % 2 else dataclasses.replace(m, queue_name="other")
                             for n, m in enumerate(messages)])
        worker = Worker(broker, ["tests", "other"], WorkerSlot())
        # what counts as a slow batch is set, not measured: a loaded machine cannot change it
        worker.slow_batch_s = slow_batch_s
        worker.boot()
        batches = []
        while sum(batches) < 1000:
            deliveries = broker.fetch(worker.queues, worker.consumer, worker._prefetch, 20)
            worker._run_batch(deliveries)
            batches.append(len(deliveries))
        assert set(broker.client.hvals(f"{broker.keys.prefix}:test:runs")) == {b"1"}  # each ran once
        return batches
    finally:
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, *timer)


@ON_NODE_AND_CLUSTER
def test_a_worker_on_two_queues_reads_growing_batches(broker):
    # Given 1,000 messages over two queues and one worker reading both, its batches never slow
    batches = _batches_over_two_queues(broker, slow_batch_s=float("inf"))
    # Then they doubled up to the prefetch on each queue as on one queue (COUNT applies per
    # stream: two queues answer up to twice the count, which must not stop the growth)
    assert broker.settings.prefetch == 64
    assert batches[:7] == [2, 4, 8, 16, 32, 64, 128] and max(batches) == 128, batches


@ON_NODE_AND_CLUSTER
def test_a_worker_whose_batches_are_slow_reads_one_entry_per_queue_at_a_time(broker):
    batches = _batches_over_two_queues(broker, slow_batch_s=-1.0)  # every batch counts as slow
    assert set(batches) == {2}, batches


@pytest.mark.parametrize("topology", ["cluster"], indirect=True)
def test_the_operators_view_reads_every_master_and_each_queue_on_its_own(broker, redis_cluster):
    import time

    import jsonschema

    from api.openapi import document
    from tracebus.engine import overview
    from tracebus.engine.redis_memory import memory_state

    # Given messages waiting in two queues that live on different masters
    broker.enqueue_many([actors.record.message((n,)) for n in range(3)]
                        + [dataclasses.replace(actors.record.message((n,)), queue_name="other") for n in range(2)])
    client = broker.client
    assert client.keyslot(broker.keys.stream("tests")) != client.keyslot(broker.keys.stream("other"))
    time.sleep(0.05)
    # Then each queue's counts and lag are read on its own master
    rows = {r["queue"]: r for r in overview.queues(broker)["queues"]}
    assert (rows["tests"]["length"], rows["other"]["length"]) == (3, 2)
    assert rows["tests"]["lag_ms"] >= 40 and rows["other"]["lag_ms"] >= 40, rows
    # and INFO comes from every master: the total is their sum, each is listed
    health = overview.redis_health(client)
    masters = {f"127.0.0.1:{n.port}" for n in redis_cluster.nodes}
    assert health["mode"] == "cluster" and {n["node"] for n in health["nodes"]} == masters
    assert health["memory"]["used_bytes"] == sum(n["memory"]["used_bytes"] for n in health["nodes"])
    assert health["connected_clients"] == sum(n["connected_clients"] for n in health["nodes"])
    spec = document(broker.settings)  # the answer of GET /api/v1/redis, as documented
    jsonschema.Draft202012Validator({"$ref": "#/components/schemas/RedisHealth",
                                     "components": spec["components"]}).validate(health)
    state = memory_state(client)
    assert len(state.nodes) == 3 and not state.full and state.max_bytes == 0
    # When one master alone reaches its maxmemory
    full = redis_cluster.node_clients()[1]
    used = int(full.info("memory")["used_memory"])
    full.config_set("maxmemory-policy", "noeviction")
    full.config_set("maxmemory", used // 2)
    try:
        # Then Redis is reported full, naming that master (its slots refuse writes)
        state = memory_state(client)
        assert state.full and f"127.0.0.1:{redis_cluster.nodes[1].port}" in state.describe(), state.describe()
        health = overview.redis_health(client)
        assert health["memory"]["used_ratio"] > 1 and health["memory"]["max_bytes"] == 0  # others: no limit
        assert [n["memory"]["used_ratio"] is not None for n in health["nodes"]].count(True) == 1
    finally:
        full.config_set("maxmemory", 0)


@pytest.mark.parametrize("topology", ["cluster"], indirect=True)
def test_a_waited_commit_sends_wait_to_the_masters_that_took_its_writes(redis_client, settings, redis_cluster):
    from tracebus.jobs.results import ChunkWriter
    from tracebus.jobs.store import JobStore
    from tests.helpers import create_trace_job

    store = JobStore(redis_client, settings.replace(chunk_cids=2, job_max_inflight_units=100))
    job = create_trace_job(store, {"profile": "query_tool", "user": "u", "container_ids": list("abcdefghijklmnopqrstuvwx"),
                                   "domains": ["history"]})
    assert len(store.take_next_units(job, 100)) == 12

    def master(key):
        return redis_client.get_node_from_key(key).name

    # a unit whose chunks sit on another master than the job (units spread by their own tag)
    unit = next(u for u in range(12) if master(store.keys.job(job)) != master(store.keys.job_chunk(job, "history", u, 0, 1)))
    attempt = store.begin_unit(job, unit)
    writer = ChunkWriter(redis_client, store.keys, job, "history", unit, attempt, 60, wait=(1, 10))
    writer.write(["C"], [[1], [2]])
    nodes = {f"127.0.0.1:{n.port}": c for n, c in zip(redis_cluster.nodes, redis_cluster.node_clients())}
    for client in nodes.values():
        client.config_resetstat()
    # the fixture's masters have no replica: the commit is refused as "Redis is moving"
    with pytest.raises(BrokerConnectionError, match="0 of 1 replicas"):
        writer.commit()

    def waits(key):
        stats = nodes[master(key)].info("commandstats")
        return stats.get("cmdstat_wait", {}).get("calls", 0)

    # the chunks' master is waited for first; it answers 0, so the commit never runs (the unit
    # is redone) and the job's master is not asked
    assert waits(store.keys.job_chunk(job, "history", unit, 0, attempt)) == 1
    assert waits(store.keys.job(job)) == 0
    assert redis_client.hget(store.keys.job_manifest(job, "history"), unit) is None
    # a script of the job's slot alone: it runs, then WAIT goes to that slot's master
    from tracebus.jobs.scripts import script

    with pytest.raises(BrokerConnectionError, match="0 of 1 replicas"):
        script(redis_client, "job_take")(
            {"job": store.keys.job(job), "units": store.keys.job_units(job), "todo": store.keys.job_todo(job),
             "progress": store.keys.job_progress(job), "inputs": store.keys.job_inputs(job)},
            {"n": 0, "per_job_cap": 10, "ttl_s": 60, "by_unit": -1}, wait=(1, 10))
    assert waits(store.keys.job(job)) == 1
    assert sum(c.info("commandstats").get("cmdstat_wait", {}).get("calls", 0) for c in nodes.values()) == 2
