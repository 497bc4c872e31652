"""``GET /metrics``: the system-wide figures read from Redis after real work, and the HTTP
metrics of the API, in one process (Falcon TestClient) and summed over the worker processes
of a real gunicorn (prometheus-client's multiprocess mode).

Every exposition is parsed with prometheus-client's own parser, and values are read from that.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from tests.api_support import (API_ENV, api_broker, api_settings, client, idle_client, source_rows,  # noqa: F401
                               submit, trace_cids, trace_workers, user, wait_job)
from tests.helpers import wait_for
from tests.redis_server import free_port
from tracebus.jobs.store import JOB_DURATION_BUCKETS_S
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.view import STATES

ROOT = Path(__file__).resolve().parent.parent


class Scrape:
    """One parsed exposition: families by name, and sample values by (name, labels)."""

    def __init__(self, text: str):
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = {(s.name, frozenset(s.labels.items())): s.value
                        for f in self.families.values() for s in f.samples}

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels`` (``default`` when absent, if given)."""
        found = self.samples.get((name, frozenset(labels.items())))
        if found is None:
            assert default is not None, f"no sample {name}{labels} in:\n{self.text}"
            return default
        return found

    def labelled(self, name: str) -> list[dict[str, str]]:
        """The label sets of every sample called ``name``."""
        return [dict(labels) for sample_name, labels in self.samples if sample_name == name]


def scrape(client) -> Scrape:
    resp = client.simulate_get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    return Scrape(resp.text)


# -- through the app, after a job run by real workers -----------------------------------------------
def test_metrics_after_a_job_cover_queues_workers_jobs_units_rows_durations_and_http(
        client, api_settings, api_broker, trace_cids, sample_db):
    queue = api_settings.queue
    before = scrape(client)
    cids = trace_cids[:300]  # 3 units of 100 CIDs

    job_id = submit(client, cids, ["history"])
    status = wait_job(client, job_id)
    units, rows = status["progress_detail"]["units_total"], status["progress_detail"]["rows"]
    # acks (and so the processed counter) are flushed right after each batch, after the settle
    wait_for(lambda: scrape(client).value("tracebus_messages_processed_total", queue=queue)
             - before.value("tracebus_messages_processed_total", queue=queue) >= units, 10,
             message="the units' messages to be acked")
    after = scrape(client)

    def delta(name, **labels):
        return after.value(name, **labels) - before.value(name, 0, **labels)

    assert status["state"] == "completed" and units == 3
    assert rows == sum(source_rows(sample_db, "history", cids).values()) > 0
    assert after.value("tracebus_redis_up") == 1
    # queues: the trace queue is listed with its depth, pending, delayed and dead counts
    for name in ("tracebus_queue_depth", "tracebus_queue_pending", "tracebus_queue_delayed",
                 "tracebus_queue_dead"):
        assert after.value(name, queue=queue) == 0, name
    # jobs by status, and what the job did
    assert after.value("tracebus_jobs", status="completed") >= 1
    assert {labels["status"] for labels in after.labelled("tracebus_jobs")} == set(STATES)
    assert delta("tracebus_jobs_submitted_total") == 1
    assert delta("tracebus_units_total", outcome="done") == units
    assert delta("tracebus_units_total", outcome="failed") == 0
    assert delta("tracebus_rows_total") == rows
    assert delta("tracebus_messages_processed_total", queue=queue) == units
    assert delta("tracebus_messages_failed_total", queue=queue) == 0
    # the job-duration histogram observed it once, with cumulative buckets
    assert delta("tracebus_job_duration_seconds_count", status="completed") == 1
    assert after.value("tracebus_job_duration_seconds_count", status="completed") >= 1
    assert 0 < delta("tracebus_job_duration_seconds_sum", status="completed") < 30
    buckets = [after.value("tracebus_job_duration_seconds_bucket", status="completed", le=le)
               for le in [*(f"{float(b)}" for b in JOB_DURATION_BUCKETS_S), "+Inf"]]
    assert buckets == sorted(buckets) and buckets[-1] == after.value(
        "tracebus_job_duration_seconds_count", status="completed")
    assert delta("tracebus_job_duration_seconds_bucket", status="completed", le="30.0") == 1
    # the two live workers and their RSS
    assert after.value("tracebus_workers_live") == 2
    rss = after.families["tracebus_worker_rss_bytes"].samples
    assert len(rss) == 2 and all(s.value > 10 * 2**20 for s in rss)
    assert {s.labels["pid"] for s in rss} == {s.labels["pid"] for s in
                                               after.families["tracebus_worker_messages_done"].samples}
    # HTTP: counted by route template and status; never a raw path
    assert after.value("tracebus_http_requests_total", method="POST", route="/api/trace/events",
                       status="202") == 1
    polls = after.value("tracebus_http_requests_total", method="GET", route="/api/trace/job/{job_id}",
                        status="200")
    assert polls >= 1
    assert after.value("tracebus_http_request_duration_seconds_count", method="GET",
                       route="/api/trace/job/{job_id}", status="200") == polls
    assert after.value("tracebus_http_requests_total", method="GET", route="/metrics", status="200") >= 2
    assert job_id not in after.text


def test_the_metrics_keys_have_a_ttl_except_the_stats_hash(client, api_broker, trace_cids):
    wait_job(client, submit(client, trace_cids[700:1000]))
    redis, keys = api_broker.client, JobKeys(api_broker.keys.prefix)

    # system-wide counters, the engine's and the jobs' (documented in their keys.py)
    assert all(redis.ttl(api_broker.keys.stats(q)) == -1 for q in api_broker.queues())
    assert api_broker.queues() and redis.ttl(keys.stats()) == -1
    ttls = {s: redis.ttl(keys.jobs_by_status(s)) for s in STATES}
    assert ttls["completed"] > 0 and all(t == -2 or t > 0 for t in ttls.values()), ttls


def test_a_queued_then_cancelled_job_moves_between_statuses_and_is_observed_once(idle_client, trace_cids):
    before = scrape(idle_client)

    job_id = submit(idle_client, trace_cids[400:700])  # 3 units; no worker reads idle-queue
    queued = scrape(idle_client)
    cancel = idle_client.simulate_post(f"/api/v1/jobs/{job_id}/cancel")
    cancelled = scrape(idle_client)

    assert cancel.status_code == 200, cancel.text
    assert queued.value("tracebus_jobs", status="queued") == \
        before.value("tracebus_jobs", status="queued") + 1
    assert queued.value("tracebus_queue_depth", queue="idle-queue") == \
        before.value("tracebus_queue_depth", 0, queue="idle-queue") + 3
    assert cancelled.value("tracebus_jobs", status="queued") == before.value("tracebus_jobs", status="queued")
    assert cancelled.value("tracebus_jobs", status="cancelled") == \
        before.value("tracebus_jobs", status="cancelled") + 1
    assert cancelled.value("tracebus_job_duration_seconds_count", status="cancelled") == \
        before.value("tracebus_job_duration_seconds_count", status="cancelled") + 1
    assert cancelled.value("tracebus_http_requests_total", method="POST",
                           route="/api/v1/jobs/{job_id}/cancel", status="200") == 1


def test_unrouted_and_failed_requests_are_counted_without_their_path(client):
    client.simulate_get("/no/such/path/123")
    client.simulate_get("/api/trace/job/trace-evt-000000000000")

    metrics = scrape(client)

    assert metrics.value("tracebus_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert metrics.value("tracebus_http_requests_total", method="GET", route="/api/trace/job/{job_id}",
                         status="404") == 1
    assert "/no/such/path" not in metrics.text and "trace-evt-000000000000" not in metrics.text


# -- a real gunicorn with 2 workers: multiprocess mode -----------------------------------------------
@pytest.fixture
def gunicorn(api_settings, tmp_path):
    """gunicorn with 2 worker processes, its metrics directory pre-seeded with a stale count."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET", "PROMETHEUS"))}
    # a previous run's counts: the arbiter must delete them at start (on_starting)
    stale = "from prometheus_client import Counter; Counter('tracebus_http_requests', '', " \
            "['method', 'route', 'status']).labels('GET', '/healthz', '200').inc(1000)"
    subprocess.run([sys.executable, "-c", stale], env={**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                   check=True)
    assert list(metrics_dir.glob("counter_*.db"))
    port = free_port()
    env.update(API_ENV, REDIS_URL=api_settings.redis_url, TRACEBUS_KEY_PREFIX=api_settings.key_prefix,
               TRACEBUS_API_BIND=f"127.0.0.1:{port}", TRACEBUS_API_WORKERS="2", TRACEBUS_API_THREADS="4",
               TRACEBUS_METRICS_DIR=str(metrics_dir))
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "api/gunicorn.conf.py"], cwd=ROOT,
                                env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def healthy():
        assert proc.poll() is None, f"gunicorn exited:\n{log.read_text()[-3000:]}"
        try:
            # a long timeout: a probe that connected is answered and counted exactly once (one
            # given up on a busy host would be counted all the same, and the test counts probes)
            return json.loads(get(url + "/healthz", timeout_s=60)) == {"status": "ok"}
        except OSError:
            return False

    try:
        wait_for(healthy, 20, interval_s=0.1, message="gunicorn answering /healthz")
        yield url, metrics_dir
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def get(url: str, timeout_s: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # a new connection each time
        return resp.read()


def healthz_by_process(metrics_dir: Path, scratch: Path) -> dict[str, float]:
    """Each worker's own count of GET /healthz, read from its file alone (public API only)."""
    out = {}
    for db in metrics_dir.glob("counter_*.db"):
        alone = scratch / db.stem
        alone.mkdir(parents=True, exist_ok=True)
        shutil.copy(db, alone / db.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(alone))
        text = generate_latest(registry).decode()
        out[db.stem] = Scrape(text).value("tracebus_http_requests_total", 0, method="GET",
                                          route="/healthz", status="200")
    return out


def test_gunicorn_workers_counts_add_up_in_one_scrape(gunicorn, tmp_path):
    url, metrics_dir = gunicorn
    # the fixture's readiness probes: one, or more when a probe timed out on a loaded machine
    # but was still answered; the stale 1000 must be gone either way
    sent = sum(healthz_by_process(metrics_dir, tmp_path / "start").values())
    assert 1 <= sent < 1000

    # Concurrent requests on fresh connections until both workers have answered some
    with ThreadPoolExecutor(8) as pool:
        for _ in range(50):
            assert all(json.loads(body) == {"status": "ok"} for body in pool.map(get, [url + "/healthz"] * 40))
            sent += 40
            per_process = healthz_by_process(metrics_dir, tmp_path / f"r{sent}")
            if sum(1 for n in per_process.values() if n > 0) >= 2:
                break
    metrics = Scrape(get(url + "/metrics").decode())

    assert sum(1 for n in per_process.values() if n > 0) == 2, per_process  # two processes answered
    assert sum(per_process.values()) == sent  # each counted its own, and the stale 1000 is gone
    assert metrics.value("tracebus_http_requests_total", method="GET", route="/healthz", status="200") == sent
    assert metrics.value("tracebus_http_request_duration_seconds_count", method="GET", route="/healthz",
                         status="200") == sent
    # and the system-wide families come with them
    assert metrics.value("tracebus_redis_up") == 1
    assert "tracebus_queue_depth" in metrics.families and "tracebus_job_duration_seconds" in metrics.families
