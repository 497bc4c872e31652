"""Fixtures and helpers of the HTTP API tests (test_api_*.py).

The app under test is ``create_app`` over the session's real redis-server, under a key
prefix of its own per test module, with a real ``tracebus worker tracebus.trace.tasks``
supervisor (a subprocess in its own session, log in a file, killed at teardown) reading
its trace queue. ApiSettings make small requests go async (``TRACE_ASYNC_CID_THRESHOLD``=200)
and split jobs into many units (``TRACE_CHUNK_CIDS``=100). Jobs that must stay unfinished
are sent to a queue no worker reads (:func:`idle_client`). Each test calls as a user of its
own, so per-user quotas never leak between tests. Expected rows come from the SQLite source
directly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from falcon import testing

from api.app import create_app
from tests.helpers import NO_REUSE, wait_for
from tracebus.engine.broker import Broker
from api.settings import ApiSettings
from tracebus.engine.registry import WorkerRegistry
from tracebus.trace import domains
from tracebus.jobs.view import FINAL_STATES
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import cids

ROOT = Path(__file__).resolve().parent.parent
#: Environment of the app's settings and of its workers.
API_ENV = {"TRACE_CHUNK_CIDS": "100", "TRACE_ASYNC_CID_THRESHOLD": "200", "TRACE_STREAM_BATCH_SIZE": "400",
           "TRACE_JOB_MAX_INFLIGHT_UNITS": "4", "TRACEBUS_BLOCK_MS": "100",
           "TRACEBUS_GRACEFUL_TIMEOUT_SECONDS": "5", "TRACEBUS_LOG_LEVEL": "warning",
           # The test client connects from 127.0.0.1 and names its user in X-User-Id, as the
           # dashboard's front would; rate limits have tests of their own (test_api_contracts.py).
           "TRACEBUS_TRUSTED_PROXIES": "127.0.0.1", "TRACEBUS_RATE_LIMITS": "off",
           # The workers' columnar copies (off by default) on, so the exports read them.
           "TRACEBUS_COLUMNAR_COPY": "1",
           # The trace routes' bare answers (tracebus's own clients read them so); the default,
           # the original's envelope there, has its tests (test_dashboard_envelope.py).
           "TRACEBUS_API_DASHBOARD_ENVELOPE": "0", **NO_REUSE}
QUERY_TOOL = list(domains.PROFILES["query_tool"])


@pytest.fixture(scope="module")
def api_settings(redis_server, sample_db) -> ApiSettings:
    env = {**API_ENV, "REDIS_URL": redis_server.url, "TRACEBUS_KEY_PREFIX": f"api{os.urandom(4).hex()}",
           "TRACEBUS_SQLITE_PATH": str(sample_db)}
    return ApiSettings.from_env(env)


@pytest.fixture(scope="module")
def api_broker(api_settings):
    broker = Broker(api_settings)
    yield broker
    broker.close()


def start_supervisor(settings: ApiSettings, log_path: Path, processes: int = 2,
                     modules=("tracebus.trace.tasks",), env: dict[str, str] | None = None) -> subprocess.Popen:
    """``tracebus worker tracebus.trace.tasks`` (or ``modules``) on ``settings``' Redis, prefix,
    queue and data (and ``env``'s variables)."""
    more = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
    env.update(API_ENV, REDIS_URL=settings.redis_url, TRACEBUS_KEY_PREFIX=settings.key_prefix,
               TRACEBUS_SQLITE_PATH=settings.sqlite_path, TRACE_WORKER_QUEUE=settings.queue, **more)
    argv = [sys.executable, "-m", "tracebus", "worker", *modules, "--processes", str(processes),
            "--queues", settings.queue]
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop_process_group(process: subprocess.Popen) -> None:
    """Teardown: SIGKILL the whole session of ``process`` and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@pytest.fixture(scope="module")
def trace_workers(api_settings, api_broker, tmp_path_factory):
    """A real supervisor with 2 workers on the app's trace queue, registered before use."""
    yield from registered_workers(api_settings, api_broker, tmp_path_factory)


def registered_workers(api_settings, api_broker, tmp_path_factory, modules=("tracebus.trace.tasks",)):
    """Start ``tracebus worker MODULES`` (2 workers), yield it once both are registered, stop it."""
    log = tmp_path_factory.mktemp("workers") / "supervisor.log"
    process = start_supervisor(api_settings, log, modules=modules)
    registry = WorkerRegistry(api_broker)
    try:
        wait_for(lambda: len(registry.list()) >= 2 or process.poll() is not None, 15,
                 message="2 registered workers")
        assert process.poll() is None, log.read_text()[-3000:]
        yield process
    finally:
        stop_process_group(process)


@pytest.fixture
def user(request) -> str:
    """A user of this test only (quotas and listings are per user)."""
    return f"u-{request.node.name[:60]}-{os.urandom(2).hex()}"


def make_client(settings: ApiSettings, broker: Broker, user: str | None = None,
                **overrides) -> testing.TestClient:
    """A TestClient over ``create_app``; ``overrides`` replace settings fields."""
    headers = {settings.user_header: user} if user else None
    return testing.TestClient(create_app(settings.replace(**overrides), broker), headers=headers)


@pytest.fixture
def client(api_settings, api_broker, trace_workers, user) -> testing.TestClient:
    """The app with live workers, calling as ``user``."""
    return make_client(api_settings, api_broker, user)


@pytest.fixture
def idle_client(api_settings, api_broker, user) -> testing.TestClient:
    """The app sending units to a queue no worker reads: its jobs stay queued."""
    return make_client(api_settings, api_broker, user, queue="idle-queue")


@pytest.fixture(scope="session")
def trace_cids(sample_db) -> list[str]:
    """The sample's trace CID set (about 1,150)."""
    return cids(sample_db)


def body(container_ids, domains_=("history",), profile="query_tool", **extra) -> dict:
    return {"profile": profile, "container_ids": list(container_ids), "domains": list(domains_), **extra}


def submit(client: testing.TestClient, container_ids, domains_=("history",), **headers) -> str:
    """POST an async request; returns the job id."""
    resp = client.simulate_post("/api/trace/events", json=body(container_ids, domains_),
                                headers=headers or None)
    assert resp.status_code == 202, resp.text
    return resp.json["job_id"]


def wait_job(client: testing.TestClient, job_id: str, timeout_s: float = 30) -> dict:
    """Poll the status endpoint until the job is final; returns the status document."""
    def final():
        doc = client.simulate_get(f"/api/trace/job/{job_id}").json
        return doc if doc["state"] in FINAL_STATES else None
    return wait_for(final, timeout_s, interval_s=0.05, message=f"job {job_id} to finish")


def canonical(row: dict) -> str:
    """A row as a comparable string (rows are compared as multisets).

    The HOLD_HOURS of a hold not yet released counts up to "now" (rounded to 36 s), so two
    reads of it a few seconds apart may differ: it is only checked to be a number.
    """
    if row.get("HOLD_STATUS") == "HOLD":
        assert isinstance(row["HOLD_HOURS"], (int, float)) and row["HOLD_HOURS"] >= 0, row
        row = {**row, "HOLD_HOURS": "<open>"}
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def source_rows(db, domain: str, container_ids) -> Counter:
    """The rows of ``domain`` for ``container_ids`` straight from the SQLite source."""
    source = SqliteSource(db)
    try:
        return Counter(canonical(dict(zip(cols, r)))
                       for cols, rows in source.fetch(domain, list(container_ids), 5000) for r in rows)
    finally:
        source.close()


def page_all(client: testing.TestClient, job_id: str, domain: str, limit: int) -> list[dict]:
    """Every row of ``domain`` through ``/result``, page by page, checking the paging fields."""
    rows, offset, total = [], 0, None
    while offset is not None:
        resp = client.simulate_get(f"/api/trace/job/{job_id}/result",
                                   params={"domain": domain, "offset": offset, "limit": limit})
        assert resp.status_code == 200, resp.text
        page = resp.json
        total = page["total"] if total is None else total
        data = page["results"][domain]["data"]
        assert page["total"] == page["results"][domain]["total"] == total
        assert page["count"] == page["results"][domain]["count"] == len(data) <= limit
        assert page["next_offset"] in (None, offset + len(data))
        rows += data
        offset = page["next_offset"]
    assert len(rows) == total
    return rows


def parse_sse(text: str) -> list[dict]:
    """Split an event-stream body into messages: {"id", "event", "data"} or {"comment"}."""
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        msg: dict = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                msg["comment"] = line[1:].strip()
            else:
                name, _, value = line.partition(": ")
                msg[name] = json.loads(value) if name == "data" else value
        out.append(msg)
    return out
