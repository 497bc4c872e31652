"""Reliability: a job survives a Redis restart (AOF) and a SIGKILLed supervisor, mid-job.

Real trace workers on this module's own redis-server, which runs with ``appendonly yes``
and ``appendfsync always``. Mid-job, Redis is stopped and started again on the same port
and files; in the other test the supervisor is SIGKILLed (its workers notice they are
orphaned and exit) and a new one started. Either way the job completes and its result's
digest is identical to the direct query's.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest_trace import direct, request, start_workers, trace_service, wait_final
from tests.reliability_support import AOF, FAULT_ENV, digest_of, own_redis, result_digest
from tracebus.trace.synth import cids


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    yield from own_redis(tmp_path_factory, "redis-aof", *AOF)


@pytest.fixture(scope="module")
def trace(sample_db) -> list[str]:
    return cids(sample_db)


@pytest.fixture(scope="module")
def expected_digest(sample_db, trace) -> str:
    return digest_of(direct(sample_db, trace))


def test_redis_restarted_with_aof_mid_job_leaves_the_result_identical(supervisor, redis_server, sample_db,
                                                                      trace, expected_digest):
    svc, env = trace_service(sample_db, **FAULT_ENV)
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace), "erin"))
    sup.wait(lambda: svc.status(job)["progress"]["units_done"] >= 5, 30, "5 units done")

    redis_server.stop()
    time.sleep(1.0)
    redis_server.start()
    progress = svc.status(job)["progress"]
    assert progress["units_done"] < progress["units_total"], "the job ended before the restart"

    status = wait_final(sup, svc, job, 90)
    assert status["state"] == "completed", status
    assert result_digest(svc, job) == expected_digest
    assert "Traceback" not in sup.log()


def test_sigkill_of_the_supervisor_mid_job_then_a_restart_leaves_the_result_identical(
        supervisor, sample_db, trace, expected_digest):
    svc, env = trace_service(sample_db, **FAULT_ENV)
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace), "frank"))
    sup.wait(lambda: svc.status(job)["progress"]["units_done"] >= 5, 30, "5 units done")

    orphans = sup.workers()
    os.kill(sup.pid, signal.SIGKILL)
    sup.process.wait()
    progress = svc.status(job)["progress"]
    assert progress["units_done"] < progress["units_total"], "the job ended before the kill"

    again = start_workers(supervisor, svc, env)
    status = wait_final(again, svc, job, 90)
    assert status["state"] == "completed", status
    assert result_digest(svc, job) == expected_digest
    for pid in orphans:  # the old workers left on their own once their supervisor was gone
        again.wait(lambda p=pid: not os.path.exists(f"/proc/{p}") or _zombie(p), 15, f"orphan {pid} to exit")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True
