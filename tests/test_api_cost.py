"""Bounded cost per request (issue 40, items 1, 2 and 8), through a real gunicorn (gevent) and
real trace workers: what one caller sends may not freeze the API's event loop, run unbounded in
the request, or be stored whole; and the smaller findings (a date with no next day, a station
that is not text, BLOBs in text columns, a backward MSD domain its units cannot read, one lot
with 30,000 split children, gunicorn's shared control socket, dead workers' metrics files).

The module's database is a copy of the sample with a BLOB written into DW_MES_JOB and one lot
split 30,000 times; the p99 test reads the larger 0.1 sample.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import psutil
import pytest

from api.settings import ApiSettings
from tests.api_process import running_api
from tests.api_support import API_ENV, QUERY_TOOL, api_broker, trace_workers  # noqa: F401
from tests.conftest_data import cached_sample
from tests.helpers import wait_for
from tracebus.jobs.store import JobStore
from tracebus.trace.synth import cids

MSD = "mid_section_defect"
#: Times GET /api/v1/me as alice, one request after another, until its stdin closes and it has
#: made at least argv[3] requests; prints the latencies (seconds) as JSON.
TIMER = """
import http.client, json, sys, threading, time
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=30)
stop, out = threading.Event(), []
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("started", flush=True)
while not stop.is_set() or len(out) < int(sys.argv[3]):
    started = time.perf_counter()
    conn.request("GET", "/api/v1/me", headers={"X-User-Id": "alice"})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    out.append(time.perf_counter() - started)
print(json.dumps(out))
"""
#: Every bucket off but the new one (each test calls as a user of its own anyway).
LIMITS = ",".join(f"{b}=0" for b in ("trace-events", "trace-job-status", "trace-seed", "trace-lineage", "job-status",
                                     "job-abandon", "query-tool-equipment", "msd-detail", "msd-export"))
BLOB_TEXT = "BLOB-模型"
SPLIT_CHILDREN = 30_000
#: Code that reads the database or builds an answer (never on the API's event loop).
ANSWER_CODE = ("/tracebus/trace/sources/", "/tracebus/trace/query/", "/tracebus/trace/pieces.py",
               "/tracebus/trace/events/kind.py", "sqlite3")


@pytest.fixture(scope="module")
def cost_db(sample_db, tmp_path_factory):
    """The sample with one resource's JOBMODELNAME stored as a BLOB and one lot split 30,000 times:
    ``(path, blob resource, its first day, split root)``."""
    path = tmp_path_factory.mktemp("costdb") / "sample.db"
    shutil.copyfile(sample_db, path)
    with sqlite3.connect(path) as db:
        resource, day = db.execute("SELECT RESOURCEID, substr(min(CREATEDATE), 1, 10) FROM DW_MES_JOB "
                                   "GROUP BY RESOURCEID ORDER BY count(*) DESC LIMIT 1").fetchone()
        db.execute("UPDATE DW_MES_JOB SET JOBMODELNAME = ? WHERE RESOURCEID = ?", (BLOB_TEXT.encode(), resource))
        root, name = db.execute("SELECT CONTAINERID, CONTAINERNAME FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT' "
                                "AND SPLITFROMID IS NULL ORDER BY CONTAINERID LIMIT 1").fetchone()
        db.executemany("INSERT INTO DW_MES_CONTAINER (CONTAINERID, CONTAINERNAME, SPLITFROMID, OBJECTTYPE, FIRSTNAME) "
                       "VALUES (?, ?, ?, 'LOT', ?)",
                       [(f"SPLIT{i:011d}", f"{name}-S{i:06d}", root, name) for i in range(SPLIT_CHILDREN)])
    return path, resource, day, root


@pytest.fixture(scope="module")
def api_settings(redis_server, cost_db) -> ApiSettings:
    env = {**API_ENV, "REDIS_URL": redis_server.url, "TRACEBUS_KEY_PREFIX": f"cost{os.urandom(4).hex()}",
           "TRACEBUS_SQLITE_PATH": str(cost_db[0])}
    return ApiSettings.from_env(env)


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """HOME and XDG_RUNTIME_DIR of the module's gunicorn (where its control socket would go)."""
    return tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("xdg")


@pytest.fixture(scope="module")
def api(api_settings, trace_workers, homes, tmp_path_factory):
    """One gunicorn worker (the hardest case), the default sync threshold, only jobs-submit limited."""
    with running_api(api_settings, tmp_path_factory.mktemp("cost") / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                     TRACE_ASYNC_CID_THRESHOLD="20000", TRACEBUS_RATE_LIMITS=LIMITS,
                     HOME=str(homes[0]), XDG_RUNTIME_DIR=str(homes[1])) as url:
        parts = urlsplit(url)
        yield parts.hostname, parts.port


def call(address, method: str, path: str, user: str, payload=None, timeout_s: float = 60, parse: bool = True):
    """``(status, JSON body or None, raw bytes)`` (``parse`` False: no JSON body; parsing megabytes
    would hold this process's GIL from a thread that measures)."""
    conn = http.client.HTTPConnection(*address, timeout=timeout_s)
    try:
        data = json.dumps(payload).encode() if payload is not None else None
        conn.request(method, path, body=data, headers={"X-User-Id": user, "Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        if not parse:
            return resp.status, None, raw
        try:
            return resp.status, json.loads(raw), raw
        except ValueError:
            return resp.status, None, raw
    finally:
        conn.close()


def error(body: dict) -> dict:
    return body["error"] if "error" in body else body["data"]["error"]


def unwrap(body: dict) -> dict:
    """The answer, out of the dashboard's envelope when in it."""
    return body["data"] if "success" in body else body


def equipment(ids, start, end, query_type="jobs", **extra) -> dict:
    return {"equipment_ids": ids, "equipment_names": [], "start_date": start, "end_date": end,
            "query_type": query_type, **extra}


def v1_job(params) -> dict:
    return {"kind": "query-tool", "params": params}


def wait_completed(address, status_url: str, user: str) -> dict:
    def done():
        _, body, _ = call(address, "GET", status_url, user)
        status = body.get("data", body)
        assert status["status"] != "failed", status
        return status if status["status"] == "completed" else None
    return wait_for(done, 60, interval_s=0.05, message=f"{status_url} completed")


# -- item 2: cost bounded at the door ------------------------------------------------------------------
def test_a_query_kind_refuses_more_units_binds_or_stored_bytes_than_its_limits_naming_them(api, cost_db):
    _, resource, day, _ = cost_db
    many = [f"EQ{i:06d}" for i in range(20_000)]
    # 20,000 IDs over 731 days: 74 windows x 20 lists = 1,480 units (minutes of every worker)
    status, body, _ = call(api, "POST", "/api/v1/jobs", "cost-units",
                           v1_job(equipment(many, "2023-01-01", "2024-12-31", "lots")))
    assert status == 413 and error(body)["code"] == "COST_LIMIT_EXCEEDED", body
    assert "1480 units" in error(body)["message"] and "TRACE_QUERY_MAX_UNITS" in error(body)["message"]
    # rejects is one statement over every ID: 3,500 IDs are 3,502 binds
    status, body, _ = call(api, "POST", "/api/v1/jobs", "cost-binds",
                           v1_job(equipment(many[:3500], day, day, "rejects")))
    assert status == 413 and "TRACE_QUERY_MAX_BINDS" in error(body)["message"], body
    # 2,500 IDs of 128 characters are 3 units but 327 KB of stored parameters
    long_ids = [f"{i:06d}".ljust(128, "x") for i in range(2500)]
    status, body, _ = call(api, "POST", "/api/v1/jobs", "cost-bytes", v1_job(equipment(long_ids, day, day)))
    assert status == 413 and "TRACE_QUERY_MAX_PARAMS_BYTES" in error(body)["message"], body
    # one text over 128 characters
    status, body, _ = call(api, "POST", "/api/query-tool/equipment-period", "cost-text",
                           equipment([resource, "x" * 129], day, day))
    assert status == 400 and "has a value of 129 characters; the limit is 128" in error(body)["message"], body


def test_params_the_statement_does_not_read_are_not_stored(api, api_settings, api_broker, cost_db):
    _, resource, day, _ = cost_db
    params = equipment([resource], day, day, container_names=[f"LOT{i}" for i in range(1000)],
                       workcenter_groups=["G"] * 10, equipment_names=["E1"], per_page=7, color="blue")
    status, body, _ = call(api, "POST", "/api/v1/jobs", "cost-unread", v1_job(params))
    assert status == 202, body
    stored = JobStore(api_broker.client, api_settings).status(body["job_id"])["app"]["params"]
    assert stored == {"query_type": "jobs", "start_date": day, "end_date": day, "equipment_ids": [resource]}


def test_a_costly_short_span_is_a_job_not_an_answer_made_in_the_request(api, cost_db):
    _, resource, day, _ = cost_db
    ids = [resource] + [f"EQ{i:06d}" for i in range(3000)]  # 4 lists of 1,000: 4 units, over the 3 answered now
    status, body, _ = call(api, "POST", "/api/query-tool/equipment-period", "cost-short", equipment(ids, day, day))
    assert status == 202 and body["data"]["async"] is True, body
    wait_completed(api, body["data"]["status_url"], "cost-short")
    status, result, _ = call(api, "GET", body["data"]["result_url"], "cost-short")
    assert status == 200 and result["data"]["total"] > 0


def test_post_v1_jobs_has_a_rate_limit_bucket(api):
    bad = v1_job(equipment(["EQ1"], "2025-01-01", "2025-13-01"))
    statuses = [call(api, "POST", "/api/v1/jobs", "cost-rate", bad) for _ in range(16)]
    assert [s for s, _, _ in statuses[:15]] == [400] * 15
    status, body, _ = statuses[15]
    assert status == 429 and error(body)["code"] == "TOO_MANY_REQUESTS" and "jobs-submit" in error(body)["message"]


def seed(values) -> dict:
    return {"profile": MSD, "params": {"mode": "container", "resolve_type": "serial_number", "values": values}}


def test_serial_number_wildcards_are_bounded_and_a_costly_resolve_is_a_job(api, cost_db):
    with sqlite3.connect(cost_db[0]) as db:
        names = [r[0] for r in db.execute("SELECT CONTAINERNAME FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT' "
                                          "ORDER BY CONTAINERNAME LIMIT 1001")]
    assert len(names) == 1001
    # a lone % (the whole container table, matched against every token)
    for lone in (["%"], ["*", names[0]], ["%_%"]):
        status, body, _ = call(api, "POST", "/api/trace/seed-resolve", "cost-lone", seed(lone))
        assert status == 400 and "at least 3 characters besides its wildcards" in error(body)["message"], body
    # more patterns than TRACE_SERIAL_MAX_PATTERNS
    status, body, _ = call(api, "POST", "/api/trace/seed-resolve", "cost-many",
                           seed([f"*{i:05d}*" for i in range(101)]))
    assert status == 400 and "TRACE_SERIAL_MAX_PATTERNS" in error(body)["message"], body
    # a pattern (a full scan) and more than TRACE_SEED_SYNC_MAX_VALUES values are jobs
    for user, values in (("cost-pattern", [names[0][:6] + "*"]), ("cost-values", names)):
        status, body, _ = call(api, "POST", "/api/trace/seed-resolve", user, seed(values))
        body = unwrap(body)
        assert status == 202 and body["async"] is True, body
        wait_completed(api, body["status_url"], user)
        status, answer, _ = call(api, "GET", body["result_url"], user)
        answer = unwrap(answer)
        assert status == 200 and answer["seed_count"] >= (1 if user == "cost-pattern" else 1001), answer


# -- item 8: the smaller findings ------------------------------------------------------------------------
def test_the_smaller_findings_are_400s_not_500s_or_failing_units(api, cost_db):
    _, resource, _, root = cost_db
    # 9999-12-31 has no next day (the window's end): was OverflowError
    status, body, _ = call(api, "POST", "/api/query-tool/equipment-period", "cost-date",
                           equipment([resource], "9999-12-01", "9999-12-31"))
    assert status == 400 and "9999-12-31" in error(body)["message"], body
    status, body, _ = call(api, "POST", "/api/trace/seed-resolve", "cost-date", {"profile": MSD, "params": {
        "mode": "date_range", "start_date": "9999-12-25", "end_date": "9999-12-31"}})
    assert status == 400 and "9999-12-31" in error(body)["message"], body
    # a station that is not text: was TypeError in domains.normalize_stations
    for station in (5, {"a": 1}, 1.5):
        status, body, _ = call(api, "POST", "/api/trace/seed-resolve", "cost-station", {"profile": MSD, "params": {
            "mode": "date_range", "start_date": "2025-01-01", "end_date": "2025-01-02", "station": station}})
        assert status == 400 and "station must be a string or a list of strings" in error(body)["message"], body
    # the backward MSD reads upstream_history and materials: downstream_rejects was a 202 whose unit failed 5 times
    status, body, _ = call(api, "POST", "/api/trace/events", "cost-msd", {
        "profile": MSD, "container_ids": [root], "domains": ["upstream_history", "downstream_rejects"],
        "params": {"direction": "backward"}})
    assert status == 400 and "not downstream_rejects" in error(body)["message"], body


def test_a_blob_in_a_text_column_is_answered_as_text_now_and_as_a_job(api, cost_db):
    _, resource, day, _ = cost_db
    status, body, raw = call(api, "POST", "/api/query-tool/equipment-period", "cost-blob",
                             equipment([resource], day, day))
    assert status == 200, raw[:300]
    assert {r["JOBMODELNAME"] for r in body["data"]["data"]} == {BLOB_TEXT}
    status, body, _ = call(api, "POST", "/api/v1/jobs", "cost-blob", v1_job(equipment([resource], day, day)))
    assert status == 202, body
    wait_completed(api, body["status_url"], "cost-blob")
    status, result, raw = call(api, "GET", body["result_url"], "cost-blob")
    assert status == 200, raw[:300]
    assert {r["JOBMODELNAME"] for r in result["data"]["data"]} == {BLOB_TEXT}


def _worker_cpu_s(port: int) -> float:
    """CPU seconds of the gunicorn worker serving ``port`` (the arbiter's only child), every thread."""
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            process = psutil.Process(conn.pid)
            worker = process.children()[0] if process.children() else process
            times = worker.cpu_times()
            return times.user + times.system
    raise AssertionError("no gunicorn on the port")


def test_one_lot_with_30000_split_children_costs_seconds_not_minutes(api, cost_db):
    root = cost_db[3]
    before = _worker_cpu_s(api[1])
    status, body, _ = call(api, "POST", "/api/trace/lineage", "cost-split",
                           {"profile": "query_tool", "container_ids": [root]}, timeout_s=300)
    cpu_s = _worker_cpu_s(api[1]) - before
    assert status == 200 and len(unwrap(body)["children_map"][root]) == SPLIT_CHILDREN
    # CPU time, not wall time (load changes that): membership checks in a list took 10.5 s of it, 0.75 s now
    print(f"lineage of one lot with {SPLIT_CHILDREN} split children: {cpu_s:.2f} s of CPU")
    assert cpu_s < 4, cpu_s


def test_gunicorn_leaves_no_control_socket_in_the_shared_per_user_path(api, homes):
    home, xdg = homes
    assert not (xdg / "gunicorn.ctl").exists() and not (home / ".gunicorn").exists()


def test_dead_workers_metrics_files_are_folded_into_one(api_settings, tmp_path):
    # workers recycled every ~10 requests
    with running_api(api_settings, tmp_path / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                     TRACEBUS_API_MAX_REQUESTS="10", HOME=str(tmp_path)) as url:
        address = (urlsplit(url).hostname, urlsplit(url).port)
        metrics_dir = tmp_path / "metrics"
        for _ in range(60):
            assert call(address, "GET", "/healthz", "m")[0] == 200
        sent = 60

        def folded():
            files = sorted(p.name for p in metrics_dir.glob("counter_*.db"))
            _, _, text = call(address, "GET", "/metrics", "m")
            count = next((float(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines()
                          if line.startswith("tracebus_http_requests_total{")
                          and 'route="/healthz"' in line and 'status="200"' in line), 0)
            return (files, count) if "counter_archive.db" in files and len(files) <= 2 and count >= sent else None

        files, count = wait_for(folded, 30, interval_s=0.1, message="the dead workers' files folded")
    # the live worker's and the archive; every /healthz counted (plus the server's own probes)
    assert sent <= count < sent + 30, count


# -- item 1: no database work on the event loop ----------------------------------------------------------
@pytest.fixture(scope="module")
def big_api(api_settings, tmp_path_factory):
    """One gunicorn worker over the 0.1 sample (11,491 CIDs): heavy answers made in the request.
    gevent's monitor thread reports, in the log, every time the loop did not switch for 50 ms,
    with the stack the loop's thread was in."""
    settings = api_settings.replace(sqlite_path=str(cached_sample(0.1)), queue="cost-idle")
    log = tmp_path_factory.mktemp("big") / "gunicorn.log"
    with running_api(settings, log, TRACEBUS_API_WORKERS="1", TRACE_ASYNC_CID_THRESHOLD="20000",
                     TRACEBUS_RATE_LIMITS="off", GEVENT_MONITOR_THREAD_ENABLE="true",
                     GEVENT_MAX_BLOCKING_TIME="0.05") as url:
        parts = urlsplit(url)
        yield parts.hostname, parts.port, settings.sqlite_path, log


def loop_stacks(log) -> list[str]:
    """The loop thread's stack of each of gevent's blocked-loop reports in the log."""
    text = log.read_text(errors="replace")
    return [part.split("\nInfo:", 1)[0] for part in text.split("Blocked Stack")[1:]]


def timed(address, what, at_least: int = 20) -> list[float]:
    """Seconds of each GET /api/v1/me of alice while ``what()`` runs, ``at_least`` of them (timed
    by a process of its own: this one's threads would add their GIL waits)."""
    timer = subprocess.Popen([sys.executable, "-c", TIMER, address[0], str(address[1]), str(at_least)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert timer.stdout.readline() == "started\n"
        what()
        timer.stdin.close()
        return json.loads(timer.stdout.read())
    finally:
        timer.kill()
        timer.wait()


def p99(latencies: list[float]) -> float:
    return sorted(latencies)[int(len(latencies) * 0.99)]


def test_heavy_answers_made_in_the_request_leave_other_callers_p99_under_100ms(big_api):
    address, db = big_api[:2], big_api[2]
    every = cids(db)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        equipment_ids = [r[0] for r in conn.execute("SELECT DISTINCT EQUIPMENTID FROM DW_MES_LOTWIPHISTORY "
                                                    "WHERE EQUIPMENTID IS NOT NULL ORDER BY 1 LIMIT 1000")]
        first = conn.execute("SELECT substr(min(TRACKINTIMESTAMP), 1, 10) FROM DW_MES_LOTWIPHISTORY").fetchone()[0]
        names = [r[0] for r in conn.execute("SELECT CONTAINERNAME FROM DW_MES_CONTAINER ORDER BY 1 LIMIT 1000")]
    last = (datetime.date.fromisoformat(first) + datetime.timedelta(days=29)).isoformat()  # 3 windows: now
    heavy = [  # four of the heaviest answers made in the request, each on seeds of its own (no cache hit)
        ("/api/trace/lineage", {"profile": "query_tool", "container_ids": every[:6000]}),
        ("/api/trace/lineage", {"profile": "query_tool_reverse", "container_ids": every[6000:]}),
        ("/api/trace/events", {"profile": "query_tool", "container_ids": every[:3000], "domains": QUERY_TOOL}),
        ("/api/query-tool/equipment-period", equipment(equipment_ids, first, last, "lots",
                                                         container_names=names)),
    ]
    assert call(address, "GET", "/api/v1/me", "alice")[0] == 200
    idle = timed(address, lambda: None, 200)  # the host's own latency now: it is shared
    answers = []

    def run_heavy():
        with ThreadPoolExecutor(len(heavy)) as pool:
            answers.extend(pool.map(lambda i: call(address, "POST", heavy[i][0], f"heavy-{i}", heavy[i][1], 300,
                                                   False), range(len(heavy))))

    reports = len(loop_stacks(big_api[3]))
    latencies = timed(address, run_heavy)
    idle += timed(address, lambda: None, 200)  # and after: the host's load changes as it likes
    assert [status for status, _, _ in answers] == [200] * len(heavy), [raw[:200] for _, _, raw in answers]
    trace = unwrap(json.loads(answers[2][2]))["results"]  # the synchronous trace, streamed chunk by chunk
    assert set(trace) == set(QUERY_TOOL) and sum(domain["count"] for domain in trace.values()) > 0
    print(f"/api/v1/me while 4 heavy answers ran: {len(latencies)} requests, p99 {p99(latencies) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms; idle before and after: p99 {p99(idle) * 1000:.1f} ms")
    # The loop never read the database or built an answer: whenever it was slow (50 ms without a
    # switch: on a shared host, also waiting for the CPU or the GIL), its thread was elsewhere
    stalls = loop_stacks(big_api[3])[reports:]
    built = [stack for stack in stalls if any(m in stack for m in ANSWER_CODE)]
    assert not built, built[0]
    # and other callers' p99 is under 100 ms, plus what the host adds by itself: this 2-core
    # machine is shared, at times with a load average of 20, and then every thread waits for a
    # core (measured at 10 to 130 ms, against 700 ms and more with the answers on the loop)
    assert p99(latencies) < 0.1 + 4 * p99(idle), (p99(latencies), p99(idle), max(latencies), len(latencies))
    assert len(latencies) >= 20, latencies
