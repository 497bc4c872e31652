"""JobStore against a real Redis: admission, unit lifecycle, fencing, cancel/retry, quota, TTLs."""

from __future__ import annotations

import re
import threading
import time

import msgpack
import pytest
from tests.helpers import create_trace_job

from tracebus.engine.errors import BrokerConnectionError
from tracebus.errors import InvalidParams
from tracebus.jobs.errors import JobNotFound, JobStateConflict, QuotaExceeded, StaleAttempt
from tracebus.jobs.keys import JobKeys
from tracebus.jobs import creation
from tracebus.jobs.store import JobStore
from tracebus.jobs.results import ChunkWriter
from tests.topology import ON_NODE_AND_CLUSTER

COLUMNS = ["CONTAINERID", "N"]


class Clock:
    def __init__(self, now: float = 1_750_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cfg(settings):
    return settings.replace(chunk_cids=3, job_max_inflight_units=2, user_max_inflight=2)


@pytest.fixture
def keys(cfg):
    return JobKeys(cfg.key_prefix)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(redis_client, keys, cfg, clock):
    return JobStore(redis_client, cfg, clock=clock)


def request(n_cids=6, domains=("history", "materials"), user="alice", params=None):
    return {"profile": "query_tool", "container_ids": [f"cid{i:04d}" for i in range(n_cids)],
            "domains": list(domains), "params": params or {}, "user": user}


def run_unit(store, job_id, unit, n_rows=2):
    """Begin, write ``n_rows`` rows in one chunk, commit and finish one unit."""
    attempt = store.begin_unit(job_id, unit)
    assert attempt is not None
    writer = store.chunk_writer(job_id, unit, attempt)
    writer.write(COLUMNS, [[f"u{unit}", i] for i in range(n_rows)])
    return store.finish_unit(job_id, unit, attempt, writer.commit())


def run_all(store, job_id, fail_units=()):
    """Drive a job to its end the way the glue does: take, run, take one more per finish."""
    queue = store.take_next_units(job_id, 100)
    outcome = None
    while queue:
        unit = queue.pop(0)
        if unit in fail_units:
            attempt = store.begin_unit(job_id, unit)
            outcome = store.fail_unit(job_id, unit, attempt, f"boom {unit}")
        else:
            outcome = run_unit(store, job_id, unit)
        queue += store.take_next_units(job_id, 1)
    return outcome


@ON_NODE_AND_CLUSTER
def test_create_stores_the_request_split_into_units(store):
    spec = request()
    spec["container_ids"] = [" cid0001", "cid0000", "cid0001", "", "cid0002", "cid0003"]
    job_id = create_trace_job(store, spec)
    assert re.fullmatch(r"trace-evt-[0-9a-f]{24}", job_id)
    status = store.status(job_id)
    assert status["status"] == "queued" and status["items"] == 4
    assert status["progress"] == {"units_done": 0, "units_failed": 0, "units_total": 4, "rows": 0}
    assert store.load_input(job_id, 0) == ["cid0001", "cid0000", "cid0002"]
    assert store.load_input(job_id, 1) == ["cid0003"]
    assert store.load_input(job_id, 3) == ["cid0003"]
    assert store.units_by_section(job_id) == {"history": [0, 1], "materials": [2, 3]}


@ON_NODE_AND_CLUSTER
def test_create_rejects_malformed_requests(store):
    with pytest.raises(InvalidParams):
        create_trace_job(store, {**request(), "container_ids": []})
    with pytest.raises(InvalidParams):
        create_trace_job(store, {**request(), "domains": "history"})


@ON_NODE_AND_CLUSTER
def test_take_respects_the_per_job_inflight_cap(store):
    job_id = create_trace_job(store, request())
    assert store.take_next_units(job_id, 10) == [0, 1]
    assert store.take_next_units(job_id, 10) == []
    run_unit(store, job_id, 0)
    assert store.take_next_units(job_id, 10) == [2]


@ON_NODE_AND_CLUSTER
def test_begin_hands_out_increasing_attempts_and_skips_what_it_must(store):
    job_id = create_trace_job(store, request())
    assert store.begin_unit(job_id, 0) is None  # pending: not sent yet
    store.take_next_units(job_id, 2)
    assert store.begin_unit(job_id, 0) == 1
    assert store.begin_unit(job_id, 0) == 2  # redelivery after a crash
    status = store.status(job_id)
    assert status["status"] == "running" and status["started_at"] is not None
    store.chunk_writer(job_id, 0, 2).commit()
    store.finish_unit(job_id, 0, 2, 0)
    assert store.begin_unit(job_id, 0) is None  # already done


@ON_NODE_AND_CLUSTER
def test_settle_is_fenced_by_the_attempt(store):
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    old = store.begin_unit(job_id, 0)
    new = store.begin_unit(job_id, 0)
    with pytest.raises(StaleAttempt):
        store.finish_unit(job_id, 0, old, 5)
    with pytest.raises(StaleAttempt):
        store.fail_unit(job_id, 0, old, "late")
    store.chunk_writer(job_id, 0, new).commit()
    store.finish_unit(job_id, 0, new, 5)
    with pytest.raises(StaleAttempt):
        store.finish_unit(job_id, 0, new, 5)  # twice: counted once
    assert store.status(job_id)["progress"]["rows"] == 5


@ON_NODE_AND_CLUSTER
def test_full_run_completes_and_releases_quota_and_single_flight(store, redis_client, keys, clock):
    job_id = create_trace_job(store, request())
    fp = redis_client.hget(keys.job(job_id), "fingerprint").decode()
    clock.now += 10
    outcome = run_all(store, job_id)
    assert outcome.finished and outcome.state == "completed"
    status = store.status(job_id)
    assert status["status"] == "completed"
    assert status["progress"]["units_done"] == 4 and status["progress"]["rows"] == 8
    assert status["finished_at"] is not None and status["elapsed_seconds"] == 10.0
    assert status["estimated_remaining_seconds"] == 0.0 and status["failed_sections"] == []
    assert redis_client.zcard(keys.user_jobs("alice")) == 0
    assert not redis_client.exists(keys.singleflight(fp, "alice"))


@ON_NODE_AND_CLUSTER
def test_a_failed_unit_fails_its_domain_and_the_job_is_partial(store):
    job_id = create_trace_job(store, request())
    outcome = run_all(store, job_id, fail_units={3})
    assert outcome.finished and outcome.state == "partial"
    status = store.status(job_id)
    assert status["status"] == "partial"
    assert status["failed_sections"] == ["materials"] and status["error"] == "boom 3"
    detail = store.detail(job_id)
    assert [d["state"] for d in detail["section_states"]] == ["done", "failed"]
    assert detail["units"][3]["state"] == "failed" and detail["units"][3]["error"] == "boom 3"


@ON_NODE_AND_CLUSTER
def test_every_domain_failing_fails_the_job(store):
    job_id = create_trace_job(store, request())
    outcome = run_all(store, job_id, fail_units={0, 2})
    assert outcome.state == "failed" and store.status(job_id)["status"] == "failed"


@ON_NODE_AND_CLUSTER
def test_cancel_skips_remaining_units_and_fences_running_ones(store, redis_client, keys):
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    attempt = store.begin_unit(job_id, 0)
    writer = ChunkWriter(redis_client, keys, job_id, "history", 0, attempt, 60)
    writer.write(COLUMNS, [["a", 1]])
    assert store.cancel(job_id) == 4
    assert store.status(job_id)["status"] == "cancelled"
    assert store.begin_unit(job_id, 1) is None
    assert store.take_next_units(job_id, 2) == []
    with pytest.raises(StaleAttempt):
        writer.write(COLUMNS, [["a", 2]])
    with pytest.raises(StaleAttempt):
        store.finish_unit(job_id, 0, attempt, 1)
    with pytest.raises(JobStateConflict):
        store.cancel(job_id)
    with pytest.raises(JobNotFound):
        store.cancel("trace-evt-000000000000")
    assert redis_client.zcard(keys.user_jobs("alice")) == 0


@ON_NODE_AND_CLUSTER
def test_retry_reruns_only_what_failed(store):
    job_id = create_trace_job(store, request(n_cids=9))  # 3 chunks x 2 domains
    run_all(store, job_id, fail_units={1, 4, 5})
    assert store.status(job_id)["status"] == "failed"
    with pytest.raises(JobStateConflict):
        store.cancel(job_id)
    assert store.retry(job_id) == [1, 4]
    status = store.status(job_id)
    assert status["status"] == "queued" and status["failed_sections"] == [] and status["error"] is None
    queue, ran = [1, 4], []
    while queue:
        unit = queue.pop(0)
        ran.append(unit)
        run_unit(store, job_id, unit)
        queue += store.take_next_units(job_id, 1)
    assert ran == [1, 4, 5]
    status = store.status(job_id)
    assert status["status"] == "completed" and status["progress"]["units_done"] == 6
    with pytest.raises(JobStateConflict):
        store.retry(job_id)


@ON_NODE_AND_CLUSTER
def test_retry_of_a_cancelled_job_keeps_its_done_units(store):
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    run_unit(store, job_id, 0)
    store.cancel(job_id)
    assert store.retry(job_id) == [1, 2]
    assert store.detail(job_id)["units"][0]["state"] == "done"


@ON_NODE_AND_CLUSTER
def test_quota_counts_inflight_jobs_per_user(store):
    first = create_trace_job(store, request(n_cids=3, domains=("history",)))
    create_trace_job(store, request(n_cids=4))
    with pytest.raises(QuotaExceeded) as exc:
        create_trace_job(store, request(n_cids=5))
    assert exc.value.retry_after_s > 0
    create_trace_job(store, request(n_cids=5, user="bob"))
    run_all(store, first)
    third = create_trace_job(store, request(n_cids=5))
    run_all(store, third, fail_units={0})
    create_trace_job(store, request(n_cids=6))
    with pytest.raises(QuotaExceeded):
        store.retry(third)


@ON_NODE_AND_CLUSTER
def test_single_flight_returns_the_inflight_job_for_the_same_request(store):
    spec = request()
    job_id = create_trace_job(store, spec)
    same = {**spec, "container_ids": list(reversed(spec["container_ids"])) * 2,
            "domains": ["materials", "history"]}
    assert create_trace_job(store, same) == job_id
    assert create_trace_job(store, request(params={"x": 1})) != job_id
    assert create_trace_job(store, request(user="bob")) != job_id
    run_all(store, job_id)
    assert create_trace_job(store, spec) != job_id


@ON_NODE_AND_CLUSTER
def test_a_unit_committed_before_a_crash_is_finished_not_rerun(store, redis_client, keys):
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    attempt = store.begin_unit(job_id, 0)
    writer = ChunkWriter(redis_client, keys, job_id, "history", 0, attempt, 60)
    writer.write(COLUMNS, [["a", 1], ["b", 2]])
    writer.commit()  # the worker dies here, before finish_unit
    assert store.begin_unit(job_id, 0) is None  # redelivery
    unit = store.detail(job_id)["units"][0]
    assert unit["state"] == "done" and unit["rows"] == 2


@ON_NODE_AND_CLUSTER
def test_a_unit_whose_commit_was_lost_runs_again_instead_of_completing(store, redis_client, keys):
    """A failover can drop a commit the old primary acknowledged while the settle that follows
    lands on the new one: the settle must not count the unit done (the job would complete
    with a section missing), but send it round again."""
    job_id = create_trace_job(store, request(n_cids=3, domains=("history",)))
    store.take_next_units(job_id, 1)
    attempt = store.begin_unit(job_id, 0)
    writer = store.chunk_writer(job_id, 0, attempt)
    writer.write(COLUMNS, [["a", 1]])
    writer.commit()
    redis_client.hdel(keys.job_manifest(job_id, "history"), 0)  # what the new primary never saw
    with pytest.raises(BrokerConnectionError, match="lost in a failover"):
        store.finish_unit(job_id, 0, attempt, 1)
    status = store.status(job_id)
    assert status["status"] == "running" and status["progress"]["units_done"] == 0
    again = store.begin_unit(job_id, 0)  # the redelivery
    assert again == attempt + 1
    run = store.chunk_writer(job_id, 0, again)
    run.write(COLUMNS, [["a", 1]])
    assert store.finish_unit(job_id, 0, again, run.commit()).state == "completed"
    assert store.page(job_id, "history", 0, 10, False)["total"] == 1


@ON_NODE_AND_CLUSTER
def test_progress_events_follow_every_state_change(store):
    job_id = create_trace_job(store, request(n_cids=3, domains=("history",)))
    run_all(store, job_id)
    events = store.read_progress(job_id)
    assert [e["event"] for _, e in events] == ["created", "unit_started", "unit_done"]
    assert events[-1][1]["status"] == "completed" and events[-1][1]["rows"] == "2"
    assert store.read_progress(job_id, last_id=events[-1][0], block_ms=10) == []


@ON_NODE_AND_CLUSTER
def test_estimated_remaining_comes_from_the_unit_rate(store, clock):
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    attempt = store.begin_unit(job_id, 0)
    assert store.status(job_id)["estimated_remaining_seconds"] is None
    clock.now += 20
    store.chunk_writer(job_id, 0, attempt).commit()
    store.finish_unit(job_id, 0, attempt, 0)
    assert store.status(job_id)["estimated_remaining_seconds"] == 60.0


@ON_NODE_AND_CLUSTER
def test_list_and_detail(store, clock):
    a = create_trace_job(store, request())
    clock.now += 1
    b = create_trace_job(store, request(user="bob"))
    run_all(store, b, fail_units={0})
    assert [j["job_id"] for j in store.list_jobs()["jobs"]] == [b, a]
    assert [j["job_id"] for j in store.list_jobs(user="alice")["jobs"]] == [a]
    assert [j["job_id"] for j in store.list_jobs(status="completed")["jobs"]] == []
    assert [j["job_id"] for j in store.list_jobs(status="partial")["jobs"]] == [b]
    assert store.list_jobs(limit=1, offset=1)["jobs"][0]["job_id"] == a
    detail = store.detail(a)
    assert len(detail["units"]) == 4 and detail["units"][2]["section"] == "materials"
    with pytest.raises(JobNotFound):
        store.status("trace-evt-ffffffffffff")


@ON_NODE_AND_CLUSTER
def test_every_key_of_a_job_expires_and_the_status_outlives_the_results(store, redis_client, keys, cfg):
    job_id = create_trace_job(store, request())
    run_all(store, job_id, fail_units={3})
    job_keys = list(redis_client.scan_iter(match=keys.job_scan(job_id)))
    assert len(job_keys) >= 9  # job, units, cids, progress, 2 manifests, 3 chunks
    assert any(not k.decode().startswith(keys.job(job_id)) for k in job_keys)  # chunks: own tags
    assert any(b":manifest:" in k for k in job_keys)
    for key in job_keys:
        ttl = redis_client.ttl(key)
        assert 0 < ttl <= cfg.job_ttl_s, (key, ttl)
    status_ttl = redis_client.pttl(keys.job(job_id))
    assert all(redis_client.pttl(k) <= status_ttl for k in job_keys)
    job2 = create_trace_job(store, request(n_cids=4))
    store.take_next_units(job2, 1)
    store.begin_unit(job2, 0)
    fp = redis_client.hget(keys.job(job2), "fingerprint").decode()
    for key in [keys.singleflight(fp, "alice"), keys.user_jobs("alice"),
                *redis_client.scan_iter(match=keys.job_scan(job2))]:
        assert redis_client.ttl(key) > 0, key
    assert msgpack.unpackb(redis_client.hget(keys.job_inputs(job2), 1)) == ["cid0003"]


def test_a_job_being_created_is_never_pruned_from_the_jobs_index(store, redis_client, keys, cfg, clock):
    # Given a job filed in the jobs index but not created yet, while another submit (another
    # API process) finishes its own creation and prunes the index
    other = JobStore(redis_client, cfg, clock=clock)
    run_create = store._run_create

    def another_submit_first(job_id, *args):
        create_trace_job(other, request(user="bob"))
        return run_create(job_id, *args)

    store._run_create = another_submit_first
    job_id = create_trace_job(store, request())
    # Then the job stays in the index (the sweeper and the listing read it)
    assert redis_client.zscore(keys.jobs_index(), job_id) is not None
    assert job_id in [doc["job_id"] for doc in store.list_jobs()["jobs"]]
    # And once filed more than a job TTL ago with its hash gone, a member is pruned as before
    redis_client.delete(keys.job(job_id))  # as its TTL would
    clock.now += cfg.job_ttl_s + 1
    create_trace_job(other, request(user="carol"))
    assert redis_client.zscore(keys.jobs_index(), job_id) is None


def test_the_jobs_index_outlives_a_job_retried_late_in_its_ttl(redis_client, keys, cfg):
    # Given the only job of the index (filed for 2 x the job TTL), cancelled after a while
    # and retried more than a job TTL after it was created
    store = JobStore(redis_client, cfg.replace(job_ttl_s=2))
    job_id = create_trace_job(store, request())
    time.sleep(1.2)
    store.cancel(job_id)
    time.sleep(1.3)
    store.retry(job_id)
    # Then the index still expires no earlier than the job it lists (the sweeper reads it)
    index, job = (redis_client.execute_command("PEXPIRETIME", key) for key in (keys.jobs_index(), keys.job(job_id)))
    assert 0 < job <= index, "the jobs index expires before a job it lists"


def test_a_job_retried_late_in_its_ttl_keeps_the_results_of_its_done_units(redis_client, keys, cfg):
    # Given a failed job whose done unit left rows and a partial aggregate, retried late in
    # the job TTL, and its re-run ending after the TTL the job's end gave those results
    store = JobStore(redis_client, cfg.replace(job_ttl_s=2))
    job_id = create_trace_job(store, request(domains=("history",)))  # units 0 and 1
    store.take_next_units(job_id, 2)
    attempt = store.begin_unit(job_id, 0)
    writer = store.chunk_writer(job_id, 0, attempt)
    writer.write(COLUMNS, [["u0", 0], ["u0", 1]])
    store.finish_unit(job_id, 0, attempt, writer.commit(b"partial-0"))
    store.fail_unit(job_id, 1, store.begin_unit(job_id, 1), "ORA-03113")
    time.sleep(1.2)
    assert store.retry(job_id) == [1]
    time.sleep(1.0)
    run_unit(store, job_id, 1)
    # Then the completed job still has every unit's rows and partial
    assert store.status(job_id)["status"] == "completed"
    assert store.page(job_id, "history", 0, 10, partial=False)["total"] == 4
    assert store.partial(job_id, 0) == b"partial-0"


def test_an_identical_request_sent_while_the_first_is_created_joins_it(store, redis_client, keys, cfg, clock):
    # Given a submit admitted but not created yet, and the same request sent meanwhile by another
    # API process
    other = JobStore(redis_client, cfg, clock=clock)
    run_create = store._run_create
    twins = []

    def an_identical_submit_meanwhile(job_id, *args):
        thread = threading.Thread(target=lambda: twins.append(create_trace_job(other, request())))
        thread.start()
        time.sleep(0.3)  # the twin finds the single-flight key naming a job with no hash yet
        try:
            return run_create(job_id, *args)
        finally:
            thread.join(10)

    store._run_create = an_identical_submit_meanwhile
    job_id = create_trace_job(store, request())
    # Then the twin joins that job: one job, counted once in the user's quota
    assert twins == [job_id]
    assert [m.decode() for m in redis_client.zrange(keys.user_jobs("alice"), 0, -1)] == [job_id]
    fp = redis_client.hget(keys.job(job_id), "fingerprint").decode()
    assert redis_client.get(keys.singleflight(fp, "alice")).decode() == job_id


def test_a_single_flight_key_left_by_a_crashed_submit_is_replaced(store, redis_client, keys, clock):
    # Given a submit that died between its admission and its job's creation, a grace time ago
    run_create = store._run_create

    def crash(*args):
        raise SystemExit("the API process died")

    store._run_create = crash
    store.admissions.undo = lambda *a: None  # died: nothing undone
    with pytest.raises(SystemExit):
        create_trace_job(store, request())
    store._run_create = run_create
    clock.now += creation.CREATE_GRACE_S + 1
    # Then the same request is admitted anew at once, as a new job
    started = time.monotonic()
    job_id = create_trace_job(store, request())
    assert time.monotonic() - started < creation.CREATE_GRACE_S / 2
    assert redis_client.exists(keys.job(job_id))
    assert redis_client.zscore(keys.user_jobs("alice"), job_id) is not None


def test_an_identical_request_after_the_job_ended_but_before_its_release_is_a_new_job(store, redis_client, keys):
    # Given a job that just completed, its single-flight key not released yet (the worker's
    # release is a step after the settle)
    job_id = create_trace_job(store, request())
    release = store.admissions.release
    store.admissions.release = lambda *a, **kw: None
    assert run_all(store, job_id).state == "completed"
    store.admissions.release = release
    # Then the same request is a new job, not the one that is no longer in flight
    again = create_trace_job(store, request())
    assert again != job_id and store.status(again)["status"] == "queued"
    assert [m.decode() for m in redis_client.zrange(keys.user_jobs("alice"), 0, -1)] == [again]
