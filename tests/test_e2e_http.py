"""End to end over HTTP: redis-server, the worker supervisor and gunicorn as real processes.

A 2,500-CID trace (above the async threshold, 2,000 here) is submitted with a plain HTTP
client, followed through ``/events`` to its end (10 units per domain at 250 CIDs a unit),
paged through in every domain (several pages each) and compared with the SQLite source row
for row (as multisets), then streamed as NDJSON. The job was 25,000 CIDs at the default
threshold and chunk size: the same paths, ten times the rows and ~16 s of CPU more.
It uses the scale-0.22 sample that other modules share (about 26,000 CIDs; ~20 s to
generate), generated once and kept on disk keyed by the generator's source
(:func:`tests.conftest_data.cached_sample`), so later runs reuse it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.api_support import canonical
from tests.conftest_data import cached_sample
from tests.helpers import NO_REUSE, wait_for
from tests.redis_server import RedisServer, free_port
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import cids

ROOT = Path(__file__).resolve().parent.parent
E2E_SCALE = 0.22  # tests.conftest_trace.BIG_SCALE too: the trace-job tests share this sample
E2E_CIDS = 2_500
#: The job is async and cut into units as a big one is, at a tenth of its size.
E2E_ENV = {"TRACE_ASYNC_CID_THRESHOLD": "2000", "TRACE_CHUNK_CIDS": "250"}
#: The biggest domain (history, ~9 rows per CID, deduplicated by a window function), the
#: many-to-many one (jobs) and the one with a time-dependent column (holds). The other two
#: query_tool domains add only time here: the API paths are the same.
DOMAINS = ["history", "holds", "jobs"]
PAGE_ROWS = 1000  # several pages in each domain (history has ~9 rows a CID)


@pytest.fixture(scope="module")
def e2e_db() -> Path:
    """The scale-0.22 sample, cached across runs by a digest of the generator's source."""
    return cached_sample(E2E_SCALE)


class System:
    """Redis (its own, unless ``redis_url`` names one), the supervisor and gunicorn, each a
    process with its log in a file."""

    def __init__(self, directory: Path, db: Path, redis_url: str | None = None, **extra_env: str):
        self.directory = directory
        self.redis = None if redis_url else RedisServer(directory / "redis").start()
        redis_url = redis_url or self.redis.url
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
        env.update(REDIS_URL=redis_url, TRACEBUS_KEY_PREFIX="e2e", TRACEBUS_SQLITE_PATH=str(db),
                   TRACEBUS_API_BIND=f"127.0.0.1:{self.port}", TRACEBUS_API_WORKERS="2",
                   TRACEBUS_API_THREADS="4", TRACEBUS_LOG_LEVEL="warning", PYTHONUNBUFFERED="1",
                   TRACEBUS_RATE_LIMITS="off",  # it pages through a job's rows as one client
                   TRACEBUS_API_DASHBOARD_ENVELOPE="0", **NO_REUSE)  # bare /api/trace/* (test_dashboard_envelope.py: the default)
        env.update(extra_env)
        self.env = env
        workers = [sys.executable, "-m", "tracebus", "worker", "tracebus.trace.tasks", "--processes", "2",
                   "--queues", "trace-events"]
        api = [sys.executable, "-m", "gunicorn", "-c", "api/gunicorn.conf.py"]
        self.processes = {"supervisor": self._start("supervisor", workers, env),
                          "gunicorn": self._start("gunicorn", api, env)}

    def _start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(self.directory / f"{name}.log", "wb") as log:
            return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{(self.directory / f'{n}.log').read_text(errors='replace')[-3000:]}"
                         for n in self.processes)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        def ready():
            assert all(p.poll() is None for p in self.processes.values()), f"a process died\n{self.logs()}"
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=2) as resp:
                    return resp.status == 200
            except (urllib.error.URLError, OSError):
                return False
        try:
            wait_for(ready, timeout_s, interval_s=0.1, message="/readyz")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}") from None

    def stop(self) -> None:
        for p in self.processes.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for p in self.processes.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # workers that outlived their master, if any
            except ProcessLookupError:
                pass
            p.wait()
        if self.redis is not None:
            self.redis.stop()


@pytest.fixture(scope="module")
def system(e2e_db, tmp_path_factory):
    running = System(tmp_path_factory.mktemp("e2e-system"), e2e_db, **E2E_ENV)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def call(method: str, url: str, payload=None, timeout_s: float = 30.0):
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "X-User-Id": "e2e"})
    return urllib.request.urlopen(req, timeout=timeout_s)


def follow_events(url: str, timeout_s: float) -> list[dict]:
    """Read an event stream until ``event: end``; returns the messages with JSON data."""
    messages, current = [], {}
    with call("GET", url, timeout_s=timeout_s) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if not line:
                if current:
                    messages.append(current)
                    if current.get("event") == "end":
                        return messages
                current = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                current[name] = json.loads(value) if name == "data" else value
    raise AssertionError(f"the event stream closed without an end event after {len(messages)} messages")


def fingerprint(row: dict) -> int:
    """A row's identity for a multiset comparison (see ``canonical`` for open holds)."""
    if row.get("HOLD_STATUS") == "HOLD":
        return hash(canonical(row))
    return hash(tuple(sorted(row.items())))


def direct(db: Path, container_ids: list[str], domain: str) -> Counter:
    source = SqliteSource(db)
    try:
        return Counter(fingerprint(dict(zip(cols, r)))
                       for cols, rows in source.fetch(domain, container_ids, 5000) for r in rows)
    finally:
        source.close()


def test_a_2500_cid_job_over_http_matches_the_source(system, e2e_db):
    container_ids = cids(e2e_db)[:E2E_CIDS]
    assert len(container_ids) == E2E_CIDS

    started = time.monotonic()
    with call("POST", f"{system.base_url}/api/trace/events",
              {"profile": "query_tool", "container_ids": container_ids, "domains": DOMAINS}) as resp:
        accepted = json.load(resp)
        assert resp.status == 202
    submit_s = time.monotonic() - started
    job_url = system.base_url + accepted["status_url"]
    events = follow_events(system.base_url + accepted["events_url"], timeout_s=120)
    run_s = time.monotonic() - started

    end = events[-1]["data"]
    assert end["status"] == "completed" and end["failed_domains"] == [], end
    assert end["progress_detail"]["units_done"] == end["progress_detail"]["units_total"] == 10 * len(DOMAINS)
    assert any(m.get("data", {}).get("event") == "unit_done" for m in events[:-1])
    totals, timings = {}, Counter()
    for domain in DOMAINS:
        got, offset, mark, pages = Counter(), 0, time.monotonic(), 0
        while offset is not None:
            pages += 1
            with call("GET", f"{job_url}/result?domain={domain}&offset={offset}&limit={PAGE_ROWS}") as resp:
                page = json.load(resp)
            got.update(fingerprint(r) for r in page["results"][domain]["data"])
            offset = page["next_offset"]
        totals[domain] = page["total"]
        assert pages >= -(-page["total"] // PAGE_ROWS), (domain, pages, page["total"])
        timings["paging"] += time.monotonic() - mark
        mark = time.monotonic()
        want = direct(e2e_db, container_ids, domain)
        timings["direct query"] += time.monotonic() - mark
        extra, missing = sum((got - want).values()), sum((want - got).values())
        assert got == want, f"{domain}: {extra} extra rows, {missing} missing"
    assert sum(totals.values()) == end["progress_detail"]["rows"]
    assert totals["history"] > 5 * PAGE_ROWS  # the paging above went through many pages

    streamed: Counter = Counter()
    mark = time.monotonic()
    with call("GET", f"{job_url}/stream") as resp:
        assert resp.headers["Content-Type"] == "application/x-ndjson"
        lines = [json.loads(raw) for raw in resp]
    for line in lines:
        if line["type"] == "records":
            streamed[line["domain"]] += line["count"]
    assert lines[0]["type"] == "meta"
    assert lines[-1] == {"type": "complete", "total_records": sum(totals.values())}
    assert dict(streamed) == {d: n for d, n in totals.items() if n}
    timings["stream"] = time.monotonic() - mark
    print(f"\n{E2E_CIDS:,} CIDs x {len(DOMAINS)} domains, {sum(totals.values()):,} rows: "
          f"202 in {submit_s * 1000:.0f} ms, "
          f"completed in {run_s:.1f} s; then " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
