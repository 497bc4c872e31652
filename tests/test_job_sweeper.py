"""Submit rollback and the job sweeper against a real Redis, driven step by step.

No workers here: the tests take units, lose messages and move the sweeper's clock by hand
(the store's injected clock), then check what the sweeper and ``JobStore.abandon`` leave in
Redis. The same behaviours with real processes are in tests/test_reliability_*.py.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers import create_trace_job
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.engine.broker import Broker
from tracebus.engine.errors import RedisFull
from tracebus.engine.keys import Keys
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.share import Shares
from tracebus.jobs.store import JobStore
from tracebus.jobs.sweeper import MAX_RESUMES, Sweeper, SweepReport


class Clock:
    """Real time plus an offset the test moves."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def cfg(settings):
    return settings.replace(chunk_cids=3, job_max_inflight_units=2, user_max_inflight=2, queue="sweep-q",
                            sweep_grace_s=5, job_timeout_s=60)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def parts(redis_client, cfg, clock):
    broker = Broker(cfg, client=redis_client)
    store = JobStore(redis_client, cfg, clock=clock)
    dispatcher = Dispatcher(broker, store)
    return store, dispatcher, Sweeper(store, dispatcher), Keys(cfg.key_prefix)


def request(user="alice", n=6):
    return {"profile": "query_tool", "container_ids": [f"cid{i:04d}" for i in range(n)],
            "domains": ["history"], "params": {}, "user": user}


def stream_units(client, keys, queue="sweep-q") -> list[int]:
    from tracebus.engine.message import Message
    return sorted(Message.decode(f[b"m"]).args[1] for _, f in client.xrange(keys.stream(queue)))


def single_flight_keys(client, k) -> list:
    return list(client.scan_iter(match=f"{k.prefix}:user:*:sf:*"))


@ON_NODE_AND_CLUSTER
def test_abandon_removes_the_job_and_what_its_admission_took(parts, redis_client):
    store, _, _, _ = parts
    job = create_trace_job(store, request())
    k = store.keys
    assert len(single_flight_keys(redis_client, k)) == 1 and redis_client.zscore(k.jobs_index(), job)
    assert redis_client.zscore(k.jobs_by_status("queued"), job)
    taken = store.take_next_units(job, 2)
    assert store.abandon(job, taken)
    for key in (k.job(job), k.job_units(job), k.job_todo(job), k.job_inputs(job), k.job_progress(job)):
        assert not redis_client.exists(key), key  # one key per EXISTS: a cluster refuses cross-slot ones
    assert redis_client.zcard(k.user_jobs("alice")) == 0
    assert not single_flight_keys(redis_client, k)
    assert all(redis_client.zscore(k.jobs_by_status(s), job) is None for s in ("queued", "running"))
    assert redis_client.zscore(k.jobs_index(), job) is None
    assert int(redis_client.hget(k.stats(), "jobs_abandoned")) == 1
    assert create_trace_job(store, request()) != job  # the same request is admitted anew


@ON_NODE_AND_CLUSTER
def test_abandon_leaves_a_live_job_alone(parts, redis_client):
    store, _, _, _ = parts
    job = create_trace_job(store, request())
    store.take_next_units(job, 2)  # a single-flight twin's submit took and sent these
    assert not store.abandon(job, [])
    assert redis_client.hget(store.keys.job(job), "status") == b"queued"
    # ... and keeps what its admission took: its quota slot, its single-flight key, its index entry
    k = store.keys
    assert redis_client.zcard(k.user_jobs("alice")) == 1 and len(single_flight_keys(redis_client, k)) == 1
    assert redis_client.zscore(k.jobs_index(), job)
    attempt = store.begin_unit(job, 0)
    assert attempt and not store.abandon(job, [0, 1])


@ON_NODE_AND_CLUSTER
def test_the_sweeper_resends_units_taken_but_never_sent(parts, redis_client, clock):
    store, _, sweeper, keys = parts
    job = create_trace_job(store, request())
    assert store.take_next_units(job, 2) == [0, 1]
    assert sweeper.sweep().resumed == {}  # within the grace time: its submitter may still send them
    clock.offset = 10
    report = sweeper.sweep()
    assert report.resumed == {job: [0, 1]}
    assert stream_units(redis_client, keys) == [0, 1]
    assert sweeper.sweep().resumed == {}  # their messages are found now: nothing to do


@ON_NODE_AND_CLUSTER
def test_the_sweeper_finds_a_job_whose_status_figure_was_lost(parts, redis_client, clock):
    # The figures are filed after each job script, in another slot: a submitter dying in
    # between leaves the job out of the status zsets. The sweeper reads the jobs index.
    store, _, sweeper, keys = parts
    job = create_trace_job(store, request())
    assert store.take_next_units(job, 2) == [0, 1]
    redis_client.zrem(store.keys.jobs_by_status("queued"), job)
    clock.offset = 10
    report = sweeper.sweep()
    assert report.resumed == {job: [0, 1]} and report.repaired == [job]
    assert stream_units(redis_client, keys) == [0, 1]
    assert redis_client.zscore(store.keys.jobs_by_status("queued"), job)  # counted again


@ON_NODE_AND_CLUSTER
def test_the_sweeper_refiles_a_finished_job_still_counted_as_running(parts, redis_client):
    # The worker that settled the job's last unit died before filing the figure.
    store, _, sweeper, _ = parts
    job = create_trace_job(store, request(n=3))  # one unit
    store.take_next_units(job, 1)
    store.fail_unit(job, 0, store.begin_unit(job, 0), "ORA-00942")
    k = store.keys
    assert redis_client.hget(k.job(job), "status") == b"failed" and redis_client.zscore(k.jobs_by_status("failed"), job)
    redis_client.zrem(k.jobs_by_status("failed"), job)
    redis_client.zadd(k.jobs_by_status("running"), {job: int(time.time() * 1000) + 60_000})
    report = sweeper.sweep()
    assert report.repaired == [job] and report.resumed == {} and report.failed == {}
    assert redis_client.zscore(k.jobs_by_status("running"), job) is None
    assert redis_client.zscore(k.jobs_by_status("failed"), job)
    assert sweeper.sweep().repaired == []  # nothing left to repair


@ON_NODE_AND_CLUSTER
def test_a_unit_lost_again_and_again_fails_its_job_with_a_reason(parts, redis_client, clock):
    store, _, sweeper, keys = parts
    job = create_trace_job(store, request())
    store.take_next_units(job, 1)
    for n in range(MAX_RESUMES):
        clock.offset += 10
        assert sweeper.sweep().resumed == {job: [0]}, n
        redis_client.delete(keys.stream("sweep-q"))  # the message is lost again
    clock.offset += 10
    report = sweeper.sweep()
    assert job in report.failed and "stranded" in report.failed[job]
    doc = store.status(job)
    assert doc["status"] == "failed" and "stranded 4 times" in doc["error"]
    assert redis_client.zcard(store.keys.user_jobs("alice")) == 0


@ON_NODE_AND_CLUSTER
def test_a_unit_settling_while_the_sweeper_looks_does_not_fail_its_job(parts, redis_client, clock):
    # Given a job whose one unit in flight ran past the grace time (no progress event) ...
    store, dispatcher, sweeper, keys = parts
    job = create_trace_job(store, request())  # two units
    dispatcher.send(job, store.take_next_units(job, 1))
    attempt = store.begin_unit(job, 0)
    clock.offset = 10
    refilled = []

    def worker_refills():  # the unit's worker sends its successor
        if not refilled:
            refilled.append(store.take_next_units(job, 2, by_unit=0))
            dispatcher.send(job, refilled[0])

    # ... which settles right after the sweeper judged the job idle, its worker refilling the
    # window while the sweeper resumes the job
    active_jobs, resume = sweeper._active_jobs, store.resume

    def judged_idle_then_the_unit_settles(now_ms):
        jobs = active_jobs(now_ms)
        writer = store.chunk_writer(job, 0, attempt)
        writer.write(["CONTAINERID"], [["cid0000"]])
        store.finish_unit(job, 0, attempt, writer.commit())
        return jobs

    def resume_as_the_worker_refills(*args):
        answer = resume(*args)
        worker_refills()
        return answer

    sweeper._active_jobs, store.resume = judged_idle_then_the_unit_settles, resume_as_the_worker_refills
    report = sweeper.sweep()
    worker_refills()
    # Then the job goes on: not failed as stranded, its next unit sent once
    assert report.failed == {} and store.status(job)["status"] == "running"
    assert refilled == [[1]] and stream_units(redis_client, keys) == [0, 1]


def test_a_job_with_nothing_in_flight_gets_its_window_opened_again(parts, redis_client, clock):
    store, _, sweeper, keys = parts
    job = create_trace_job(store, request())
    redis_client.hset(store.keys.job(job), "inflight", 2)  # a drifted counter: the window looks full
    clock.offset = 10
    assert sweeper.sweep().resumed == {job: [0, 1]}
    assert stream_units(redis_client, keys) == [0, 1]


def test_the_sweeper_fails_a_job_past_its_timeout_when_no_unit_runs(parts, clock):
    store, dispatcher, sweeper, _ = parts
    job = create_trace_job(store, request())
    dispatcher.start(job)
    clock.offset = 61
    assert sweeper.sweep().timed_out == [job]
    doc = store.status(job)
    assert doc["status"] == "failed" and "TRACE_JOB_TIMEOUT_SECONDS" in doc["error"]


def test_one_supervisor_sweeps_per_period(parts, cfg):
    store, dispatcher, sweeper, _ = parts
    other = Sweeper(store, dispatcher)
    assert sweeper.maybe_sweep() is not None
    assert other.maybe_sweep() is None  # the lock is held for this period


def test_an_out_of_memory_refusal_is_redis_full(redis_client):
    used = int(redis_client.info("memory")["used_memory"])
    redis_client.config_set("maxmemory", max(used - (1 << 20), 1 << 20))
    try:
        with pytest.raises(RedisFull, match="Redis is full"):
            with redis_errors():
                redis_client.set("tbtest:full", "x" * 1000)
    finally:
        redis_client.config_set("maxmemory", 0)


@ON_NODE_AND_CLUSTER
def test_a_job_held_back_for_its_users_share_is_not_stranded_and_starts_when_a_place_frees(
        parts, redis_client, clock):
    # Given two jobs of one user: the first's submit takes the user's whole share (2 units),
    # the second's submit gets no place and sends nothing
    store, dispatcher, sweeper, keys = parts
    first = create_trace_job(store, request(n=9))
    dispatcher.start(first)
    second = create_trace_job(store, request(n=6, user="alice") | {"domains": ["materials"]})
    dispatcher.start(second)
    assert stream_units(redis_client, keys) == [0, 1]
    assert int(redis_client.hget(store.keys.job(second), "inflight") or 0) == 0
    # When the sweeper finds it idle past the grace time with nothing queued
    clock.offset = 10
    report = sweeper.sweep()
    # Then it is left waiting its turn, not failed as stranded
    assert second not in report.failed and second not in report.resumed, report
    assert store.status(second)["status"] == "queued"
    # And a unit of the first job settling hands its place to the second (fewest held first)
    attempt = store.begin_unit(first, 0)
    store.chunk_writer(first, 0, attempt).commit()
    store.finish_unit(first, 0, attempt, 0)
    assert Shares(store).open_units(first, by_unit=0) == {second: [0]}


@ON_NODE_AND_CLUSTER
def test_a_progress_event_in_the_same_millisecond_as_the_one_judged_idle_is_progress(parts, redis_client, clock):
    # Given a stranded-looking job (a unit taken, never sent) judged idle on its last progress
    # event, and a second event in that same millisecond (a unit begun and settled within one ms)
    store, _, sweeper, _ = parts
    job = create_trace_job(store, request())
    store.take_next_units(job, 1)
    stream = store.keys.job_progress(job)
    (seen,) = sweeper._last_progress([job])  # as the sweep judged it idle
    ms, seq = redis_client.xrevrange(stream, count=1)[0][0].decode().split("-")
    redis_client.xadd(stream, {"event": "unit_done"}, id=f"{ms}-{int(seq) + 1}")
    report = SweepReport()

    # When the sweeper acts on what it judged
    sweeper._resume_stranded({job: seen}, report)

    # Then the job moved: it is left to the next sweep, neither resumed nor failed
    assert report.resumed == {} and report.failed == {}, report
    assert store.status(job)["status"] in ("queued", "running")
