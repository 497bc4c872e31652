"""Reliability: a job is never stranded between its creation and its first units queued.

Reproduces issue 12's first finding with real processes: after a Redis restart the API's
per-thread producer connection is stale, so the first send of the next submit fails after
the job was created. The job must be rolled back (no stranded job, no single-flight key, no
quota slot), and a job whose units were taken but never sent (its submitter died) must be
found by the sweeper and completed; the job timeout must hold when no unit runs at all.
"""

from __future__ import annotations

import time

import pytest

from tests.api_support import make_client
from tests.conftest_trace import direct, request, start_workers, trace_service, wait_final
from tests.helpers import create_trace_job
from tests.reliability_support import AOF, FAULT_ENV, digest_of, own_redis, result_digest
from tracebus.engine.keys import Keys
from tracebus.trace.synth import cids


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    yield from own_redis(tmp_path_factory, "redis-restart", *AOF)


@pytest.fixture(scope="module")
def sample_cids(sample_db) -> list[str]:
    return cids(sample_db)[:300]


def test_submit_after_a_redis_restart_rolls_back_and_strands_nothing(supervisor, redis_server, redis_client,
                                                                      sample_db, sample_cids):
    svc, env = trace_service(sample_db, **FAULT_ENV, TRACE_ASYNC_CID_THRESHOLD="10")
    sup = start_workers(supervisor, svc, env)
    client = make_client(svc.settings, svc.dispatcher.broker, "alice")
    body = request(sample_cids[:100])
    first = client.simulate_post("/api/trace/events", json=body)  # opens this thread's producer connection
    assert first.status_code == 202, first.text
    wait_final(sup, svc, first.json["data"]["job_id"], 30)
    keys = svc.store.keys
    wait_in_flight_gone(sup, redis_client, keys)

    # Where the stale socket fails decides the outcome: a send that fails is sent again on a new
    # connection (202, the job runs), a reply that fails after the send rolls the job back (503).
    # Which one a restart gives is the kernel's timing; the test restarts until it meets the
    # rollback (3 tries), and every 202 on the way must be a job that completes.
    for _ in range(3):
        redis_server.stop()
        redis_server.start()
        resp = client.simulate_post("/api/trace/events", json=request(sample_cids[100:200]))
        if resp.status_code == 503:
            break
        assert resp.status_code == 202, resp.text
        status = wait_final(sup, svc, resp.json["data"]["job_id"], 30)
        assert status["state"] == "completed", status
        wait_in_flight_gone(sup, redis_client, keys)
    else:
        pytest.fail(f"the stale producer connection was not met in 3 restarts: {resp.status_code} {resp.text}")
    # The send failed on the stale connection: the job is rolled back
    assert resp.json["error"]["code"] == "SERVICE_UNAVAILABLE"
    held = in_flight(redis_client, keys)
    assert not held, f"the rollback left these in flight: {held}"
    resp = client.simulate_post("/api/trace/events", json=request(sample_cids[100:200]))
    assert resp.status_code == 202, resp.text
    job = resp.json["data"]["job_id"]
    status = wait_final(sup, svc, job, 30)
    assert status["state"] == "completed", status
    assert result_digest(svc, job) == digest_of(direct(sample_db, sample_cids[100:200]))


def in_flight(redis_client, keys) -> dict[str, list]:
    """What Redis still counts as in flight: taken quota slots, single-flight keys, and jobs
    filed as queued or running; {} when nothing is."""
    held = {
        "quota slots": [k for k in redis_client.scan_iter(match=f"{keys.prefix}:user:*:inflight")
                        if redis_client.zcard(k)],
        "single-flight keys": list(redis_client.scan_iter(match=f"{keys.prefix}:user:*:sf:*")),
        "jobs": [j for s in ("queued", "running") for j in redis_client.zrange(keys.jobs_by_status(s), 0, -1)],
    }
    return {name: found for name, found in held.items() if found}


def wait_in_flight_gone(sup, redis_client, keys) -> None:
    """Wait until a job that just finished has been filed as such. The worker settles the job's
    hash first and files the figures, the quota slot and the single-flight key right after (see
    tracebus.jobs.figures): a Redis restart in between would lose that filing to the sweeper's
    later repair, and leave the rollback's check below looking at another job's leftovers."""
    sup.wait(lambda: not in_flight(redis_client, keys), 10, "the finished job's figures and quota slot")


def test_a_job_whose_first_units_were_never_sent_is_resumed_by_the_sweeper(supervisor, redis_client,
                                                                           sample_db, sample_cids):
    svc, env = trace_service(sample_db, **FAULT_ENV)
    sup = start_workers(supervisor, svc, env)
    # The submitter took the first units and died before sending them: nothing is queued.
    job = create_trace_job(svc.store, {**request(sample_cids[:100]), "user": "bob"})
    taken = svc.store.take_next_units(job, 2)
    assert taken == [0, 1]
    assert redis_client.xlen(Keys(svc.settings.key_prefix).stream(svc.settings.queue)) == 0

    status = wait_final(sup, svc, job, 30)
    assert status["state"] == "completed", status
    sup.wait(lambda: f"job {job} was stranded: units 0,1 re-sent by the sweeper" in sup.log(), 5, "the sweeper's line")
    assert result_digest(svc, job) == digest_of(direct(sample_db, sample_cids[:100]))


def test_the_job_timeout_holds_when_no_unit_runs(supervisor, sample_db, sample_cids):
    svc, env = trace_service(sample_db, **{**FAULT_ENV, "TRACE_JOB_TIMEOUT_SECONDS": "3"})
    sup = start_workers(supervisor, svc, env)
    # Its units wait in a queue no worker reads: no unit ever starts to check the timeout.
    idle = svc.settings.replace(queue="nobody-reads-this")
    job = create_trace_job(svc.store, {**request(sample_cids[:60]), "user": "carol"})
    svc.store.redis.hset(svc.store.keys.job(job), "queue", idle.queue)
    svc.dispatcher.start(job)
    started = time.monotonic()
    status = wait_final(sup, svc, job, 15)
    assert status["state"] == "failed", status
    assert "TRACE_JOB_TIMEOUT_SECONDS" in (status.get("error") or str(status)), status
    assert time.monotonic() - started < 3 + 5
    # Logged just after the job was failed: wait for the line rather than race it.
    sup.wait(lambda: f"job {job} failed: ran past 3 s (found by the sweeper)" in sup.log(), 5, "the sweeper's line")
