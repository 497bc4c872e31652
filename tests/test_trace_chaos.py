"""Trace jobs while worker processes die: SIGKILLed workers mid-job, and a whole host
(supervisor and workers) killed and started again.

The result must still equal the direct query with no row duplicated, and a resumed job must
not re-run the units that were done before the kill (their attempt stays 1).
"""

from __future__ import annotations

import os
import signal

from tests.helpers import create_trace_job
from tests.conftest_trace import (
    STEADY_CLAIM,
    assert_every_key_expires,
    assert_result,
    chunk_keys,
    first_expected,
    manifest_chunk_keys,
    request,
    start_workers,
    subset,
    trace_service,
    units,
    wait_final,
)
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.trace.synth import cids

#: Units done at which one worker is SIGKILLed (the job has 200 units).
KILL_AT_UNITS = (15, 40, 65, 90, 115)
#: The killed job: 4,000 CIDs in chunks of 100, so 200 units as a 20,000-CID job in chunks of
#: 500 has; what the kills test is the units and their attempts, not the rows per unit (it was
#: 8,000 CIDs in chunks of 200). The same CIDs as test_trace_jobs.py's 200-unit job, so an
#: xdist worker that runs both queries them directly once (first_expected).
CHAOS_CIDS, CHAOS_CHUNK = 4_000, "100"
#: The host-kill job: 3,000 CIDs in chunks of 250, 60 units (it was 6,000 in chunks of 500).
RESUME_CIDS, RESUME_CHUNK = 3_000, "250"


@ON_NODE_AND_CLUSTER
def test_sigkilled_workers_mid_job_leave_the_result_whole(supervisor, redis_client, big_db, big_cids):
    svc, env = trace_service(big_db, TRACE_CHUNK_CIDS=CHAOS_CHUNK)
    sup = start_workers(supervisor, svc, env)
    some = big_cids[:CHAOS_CIDS]
    expected = first_expected(big_db, CHAOS_CIDS)
    job = svc.submit(svc.parse(request(some), "alice"))

    killed = []
    for threshold in KILL_AT_UNITS:
        sup.wait(lambda n=threshold: svc.status(job)["progress"]["units_done"] >= n, 30,
                 f"{threshold} units done")
        # a live worker not killed yet, without waiting for the last one killed to be replaced:
        # the 200 units take a second or two, so a kill that waited out each respawn would
        # land after the job's end
        live = sorted(sup.wait(lambda: sup.workers() - set(killed), 10, "a live worker not yet killed"))
        pid = live[len(killed) % len(live)]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    status = wait_final(sup, svc, job, 60)

    assert status["status"] == status["state"] == "completed", status
    assert status["progress"]["units_done"] == status["progress"]["units_total"] == 200
    reruns = [u["unit"] for u in units(svc, job) if u["attempt"] > 1]
    print(f"\n{len(killed)} workers killed; units run more than once: {reruns}")
    assert status["progress"]["rows"] == sum(sum(c.values()) for c in expected.values())
    assert_result(svc, job, expected)
    assert not sup.workers() & set(killed) and len(sup.wait_workers(2)) == 2
    reaped = [line for line in sup.log().splitlines() if "killed by SIGKILL" in line]
    assert all(any(f"worker {pid} " in line for line in reaped) for pid in killed)
    assert chunk_keys(redis_client, svc.store.keys, job) == manifest_chunk_keys(redis_client, svc, job)
    assert_every_key_expires(redis_client, svc, [job])


def test_resume_after_a_kill_skips_the_units_already_done(supervisor, redis_client, big_db, big_cids):
    svc, env = trace_service(big_db, TRACE_CHUNK_CIDS=RESUME_CHUNK, **STEADY_CLAIM)
    sup = start_workers(supervisor, svc, env)
    some = big_cids[:RESUME_CIDS]
    job = svc.submit(svc.parse(request(some), "alice"))

    def history_under_way():
        rows = units(svc, job)
        return (sum(u["state"] == "done" for u in rows) >= 6
                and any(u["state"] == "running" for u in rows))

    sup.wait(history_under_way, 30, "units done and a unit running")
    sup.kill()  # the host dies: supervisor and workers at once, nothing reclaimed
    before = units(svc, job)
    done = {u["unit"] for u in before if u["state"] == "done"}
    running = {u["unit"] for u in before if u["state"] == "running"}
    assert running, "the kill hit no running unit"
    assert svc.status(job)["state"] == "running"

    restarted = start_workers(supervisor, svc, env)  # its janitor reclaims the dead workers' entries
    status = wait_final(restarted, svc, job, 60)

    assert status["state"] == "completed", status
    after = {u["unit"]: u for u in units(svc, job)}
    assert all(after[u]["attempt"] == 1 for u in done), "a unit done before the kill ran again"
    assert all(after[u]["attempt"] == 2 for u in running), [after[u] for u in running]
    rerun = [after[u] for u in after if u not in running and after[u]["attempt"] != 1]
    assert not rerun, f"units run again though not interrupted: {rerun}"
    assert all(u["state"] == "done" for u in after.values())
    assert_result(svc, job, subset(first_expected(big_db, CHAOS_CIDS), some))
    assert_every_key_expires(redis_client, svc, [job])


def test_a_redelivered_refill_does_not_resend_units_that_started(supervisor, sample_db):
    """The window refill remembers what it took, for a worker that dies between taking and
    sending; replayed after the units were sent and started, it must not send them again
    (a duplicate would fence off the running attempt and replay its own refill in turn)."""
    svc, _ = trace_service(sample_db)
    store = svc.store
    job = create_trace_job(store, {**request(cids(sample_db)), "user": "alice"})
    first, _ = store.take_next_units(job, 2)
    attempt = store.begin_unit(job, first)
    store.chunk_writer(job, first, attempt).commit()
    store.finish_unit(job, first, attempt, 0)

    refill = store.take_next_units(job, 1, by_unit=first)
    assert refill and store.take_next_units(job, 1, by_unit=first) == refill  # not sent yet: again
    store.begin_unit(job, refill[0])  # it was sent after all, and runs
    assert store.take_next_units(job, 1, by_unit=first) == []
