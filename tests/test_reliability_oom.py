"""Reliability: a full Redis (maxmemory reached, noeviction) mid-job is its own condition.

Real trace workers on this module's own redis-server; mid-job the test sets ``maxmemory``
below what Redis uses (CONFIG SET). Then: the running job ends ``failed`` with a reason that
says Redis is full, in bounded time (no window left that nobody refills); a submit answers
507 ``REDIS_FULL``; ``/readyz`` and ``/metrics`` say Redis is full; the workers keep running
(no crash loop). Once memory is given back, a retry of the job completes with the right rows.
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.api_support import make_client
from tests.conftest_trace import direct, request, start_workers, trace_service, wait_final
from tests.reliability_support import FAULT_ENV, digest_of, own_redis, result_digest
from tracebus.trace.synth import cids


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    yield from own_redis(tmp_path_factory, "redis-oom", "--maxmemory-policy", "noeviction")


def fill_up(client: redis.Redis) -> None:
    """Make Redis full: maxmemory under what it uses now."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", max(used - (1 << 20), 1 << 20))


def test_redis_full_mid_job_fails_the_job_in_bounded_time_and_says_so(supervisor, redis_client, sample_db):
    trace = cids(sample_db)[:300]
    svc, env = trace_service(sample_db, **FAULT_ENV, TRACE_ASYNC_CID_THRESHOLD="10")
    sup = start_workers(supervisor, svc, env)
    workers = sup.wait_workers(2)
    client = make_client(svc.settings.replace(trusted_proxies="127.0.0.1"), svc.dispatcher.broker, "dana")
    resp = client.simulate_post("/api/trace/events", json=request(trace))
    assert resp.status_code == 202, resp.text
    job = resp.json["data"]["job_id"]  # the dashboard's route: enveloped
    try:
        sup.wait(lambda: svc.status(job)["progress"]["units_done"] >= 1, 30, "a unit done")
        fill_up(redis_client)
        full_at = time.monotonic()

        status = wait_final(sup, svc, job, 20)
        assert time.monotonic() - full_at < 15
        assert status["state"] in ("failed", "partial"), status
        assert "Redis is full" in svc.store.status(job)["error"]

        resp = client.simulate_post("/api/trace/events", json=request(trace[:50]))
        assert resp.status_code == 507, resp.text
        assert resp.json["error"]["code"] == "REDIS_FULL"
        assert "Redis is full" in resp.json["error"]["message"]

        ready = client.simulate_get("/readyz")
        assert ready.status_code == 503 and "redis_memory" in ready.json["missing"], ready.text
        assert ready.json["redis"].startswith("full:")
        metrics = client.simulate_get("/metrics").text
        assert "tracebus_redis_full 1.0" in metrics
        assert "tracebus_redis_memory_used_ratio" in metrics

        time.sleep(3)  # workers meet the full Redis in their loop and registry writes
        assert sup.workers() == workers, "workers were restarted while Redis was full"
        log = sup.log()
        assert "crashed" not in log and "exited with code" not in log, log[-3000:]
        assert log.count("Redis is full") >= 1

        # A supervisor (re)started while Redis is full boots workers that stay up.
        sup.kill()
        again = start_workers(supervisor, svc, env)
        booted = again.wait_workers(2)
        time.sleep(3)
        assert again.workers() == booted, f"workers crash-looped at boot:\n{again.log()[-3000:]}"
        assert "failed to boot" not in again.log() and "crashed" not in again.log()
        sup = again
    finally:
        redis_client.config_set("maxmemory", 0)

    assert client.simulate_get("/readyz").status_code == 200
    resp = client.simulate_post(f"/api/v1/jobs/{job}/retry")
    assert resp.status_code == 202, resp.text
    status = wait_final(sup, svc, job, 30)
    assert status["state"] == "completed", status
    assert result_digest(svc, job) == digest_of(direct(sample_db, trace))
