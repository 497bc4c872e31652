"""What one caller may cost the others, through a real gunicorn (issue 40): the proxy's proof
behind X-Forwarded-For, a query kind's result streamed from the worker-sorted chunks, and
the Redis bytes a caller's jobs and answers may hold (TRACE_USER_MAX_BYTES).
"""

from __future__ import annotations

import http.client
from collections import Counter
import json
import socket
import sqlite3
from urllib.parse import urlsplit

import psutil
import pytest
import redis

from tests.api_process import running_api
from tests.conftest_data import cached_sample
from tests.api_support import (QUERY_TOOL, api_settings, body, start_supervisor, stop_process_group,  # noqa: F401
                               trace_cids)
from tests.helpers import wait_for
from tracebus.jobs.budget import Budget
from tracebus.jobs.keys import JobKeys
from tracebus.trace.synth import cids

PROXY_TOKEN = "proxy-s3cret"


@pytest.fixture(scope="module")
def proxied(api_settings, tmp_path_factory):
    """gunicorn behind a trusted proxy that proves itself (TRACEBUS_PROXY_TOKEN); no worker
    reads its queue."""
    settings = api_settings.replace(queue="budget-idle")
    with running_api(settings, tmp_path_factory.mktemp("proxied") / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                     TRACEBUS_PROXY_TOKEN=PROXY_TOKEN) as url:
        parts = urlsplit(url)
        yield parts.hostname, parts.port


def _call(address, method: str, path: str, headers: dict, payload=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(*address, timeout=30)
    try:
        data = json.dumps(payload).encode() if payload is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else {})
    finally:
        conn.close()


def test_x_forwarded_for_is_believed_only_with_the_proxys_proof(proxied, trace_cids):
    victim = {"X-Forwarded-For": "203.0.113.7", "X-Proxy-Token": PROXY_TOKEN}
    # Given an anonymous caller behind the proxy, named by its address, with a job
    status, me = _call(proxied, "GET", "/api/v1/me", victim)
    assert (status, me["user"]) == (200, "anon:203.0.113.7")
    payload = {"profile": "query_tool", "container_ids": trace_cids[:201], "domains": ["history"]}
    status, job = _call(proxied, "POST", "/api/trace/events", victim, payload)
    assert status == 202, job
    # When a local process (the proxy's address) names that address without the proof
    for forged in ({"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-For": "203.0.113.7", "X-Proxy-Token": "guess"}):
        status, me = _call(proxied, "GET", "/api/v1/me", forged)
        # Then it is itself, the peer's address, and sees none of the victim's jobs
        assert (status, me["user"]) == (200, "anon:127.0.0.1"), me
        status, listing = _call(proxied, "GET", "/api/v1/jobs", forged)
        assert status == 200 and job["job_id"] not in json.dumps(listing), listing
    # and rotating the address does not rotate its quota (it stays one caller)
    users = {_call(proxied, "GET", "/api/v1/me", {"X-Forwarded-For": f"198.51.100.{n}"})[1]["user"] for n in range(5)}
    assert users == {"anon:127.0.0.1"}


BUDGET = 400_000  # TRACE_USER_MAX_BYTES of the budget test: a few jobs' results


@pytest.fixture(scope="module")
def budgeted(api_settings, tmp_path_factory):
    """gunicorn and two trace workers with a small per-user budget; (address, settings)."""
    settings = api_settings.replace(queue="budget-run")
    logs = tmp_path_factory.mktemp("budget")
    extra = {"TRACE_USER_MAX_BYTES": str(BUDGET), "TRACE_USER_MAX_INFLIGHT": "5"}
    supervisor = start_supervisor(settings, logs / "workers.log", processes=2, env=extra)
    try:
        with running_api(settings, logs / "gunicorn.log", TRACEBUS_API_WORKERS="1", **extra) as url:
            parts = urlsplit(url)
            yield (parts.hostname, parts.port), settings
    finally:
        stop_process_group(supervisor)


def _held_bytes(client, prefix: str, job_ids, by_key: bool = False):
    """What the keys of ``job_ids`` hold in Redis (MEMORY USAGE of each); ``by_key``: per kind
    of key (chunk, progress, units...), to say where it went."""
    usage = Counter()
    for job_id in job_ids:
        for key in client.scan_iter(match=f"{prefix}:job:{{{job_id}*", count=1000):
            name = key.decode().rsplit("}", 1)[-1].split(":")
            usage[name[1] if len(name) > 1 and not name[1].isdigit() else "chunk" if len(name) > 1 else "hash"] += \
                client.memory_usage(key) or 0
    return dict(usage) if by_key else sum(usage.values())


def test_one_user_in_a_loop_cannot_take_redis_past_the_budget_while_others_submit(budgeted, trace_cids):
    address, settings = budgeted
    client = redis.Redis.from_url(settings.redis_url)
    hog = {"X-User-Id": "hog"}
    # Given a user who keeps submitting different async traces of every domain, within every
    # quota (waiting for a slot when five are in flight, as a polite client does)
    jobs, refused = [], None
    for n in range(60):
        payload = body(trace_cids[n * 13 % 900:][:201 + n], domains_=QUERY_TOOL)

        def admitted_or_refused(payload=payload):
            answer = _call(address, "POST", "/api/trace/events", hog, payload)
            return None if answer[0] == 429 and answer[1]["error"]["code"] == "QUOTA_EXCEEDED" else answer

        status, answer = wait_for(admitted_or_refused, 60, interval_s=0.1, message="a slot of hog's")
        if status == 429 and answer["error"]["code"] == "BUDGET_EXCEEDED":
            refused = answer
            break
        assert status == 202, answer
        jobs.append(answer["job_id"])
        # What hog's jobs hold never passes the budget by more than the units in flight write
        # at once (two workers, a chunk each)
        held = _held_bytes(client, settings.key_prefix, jobs)
        assert held < BUDGET * 1.25, (len(jobs), held, _held_bytes(client, settings.key_prefix, jobs, by_key=True))
    # Then it is refused with a 429 that names the budget, before Redis fills
    assert refused is not None, f"{len(jobs)} jobs, {_held_bytes(client, settings.key_prefix, jobs)} bytes"
    assert "TRACE_USER_MAX_BYTES" in refused["error"]["message"]
    # and another user's job is admitted and completes meanwhile
    status, other = _call(address, "POST", "/api/trace/events", {"X-User-Id": "neighbour"}, body(trace_cids[-201:]))
    assert status == 202, other
    wait_for(lambda: _call(address, "GET", f"/api/trace/job/{other['job_id']}", {"X-User-Id": "neighbour"})[1]
             .get("status") == "completed", 60, message="the neighbour's job to complete")
    held = _held_bytes(client, settings.key_prefix, jobs)
    print(f"hog: {len(jobs)} jobs admitted, {held} bytes held at most {BUDGET}")
    assert held < BUDGET * 1.25


TINY = 60_000  # TRACE_USER_MAX_BYTES of the lineage test: about 8 trees of 10 seeds (7.5 KB each)


@pytest.fixture(scope="module")
def tiny(api_settings, tmp_path_factory):
    """gunicorn and a trace worker with a tiny per-user budget; (address, settings)."""
    settings = api_settings.replace(queue="budget-tiny")
    logs = tmp_path_factory.mktemp("tiny")
    supervisor = start_supervisor(settings, logs / "workers.log", processes=1,
                                  env={"TRACE_USER_MAX_BYTES": str(TINY)})
    try:
        with running_api(settings, logs / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                         TRACE_USER_MAX_BYTES=str(TINY)) as url:
            parts = urlsplit(url)
            yield (parts.hostname, parts.port), settings
    finally:
        stop_process_group(supervisor)


def test_a_job_whose_rows_pass_the_budget_fails_saying_so_and_keeps_no_more(tiny, trace_cids):
    address, settings = tiny
    client = redis.Redis.from_url(settings.redis_url)
    user = {"X-User-Id": "one-big-job"}
    # Given a job whose result (600 CIDs of every domain) is larger than the user's budget
    status, job = _call(address, "POST", "/api/trace/events", user, body(trace_cids[:600], domains_=QUERY_TOOL))
    assert status == 202, job
    # Then it fails, saying why, once its rows reach the budget
    doc = wait_for(lambda: (d := _call(address, "GET", f"/api/job/{job['job_id']}", user)[1]["data"])["status"]
                   in ("completed", "failed") and d, 60, message="the job to end")
    assert doc["status"] == "failed" and "TRACE_USER_MAX_BYTES" in doc["error"], doc
    # and what it left in Redis stays within the budget (and a chunk in flight)
    assert _held_bytes(client, settings.key_prefix, [job["job_id"]]) < TINY * 1.5
    assert Budget(client, JobKeys(settings.key_prefix), TINY).spent("one-big-job") <= TINY


def test_lineage_answers_count_against_the_budget(tiny, trace_cids):
    address, settings = tiny
    client = redis.Redis.from_url(settings.redis_url)
    spent = Budget(client, JobKeys(settings.key_prefix), TINY).spent
    user = {"X-User-Id": "tree-reader"}
    # Given a user asking for the reverse trees of 20 different seed sets (answered now, and
    # each answer kept for an hour under its query id, 7.5 KB each here)
    kept = []
    for n in range(20):
        status, answer = _call(address, "POST", "/api/trace/lineage", user,
                               {"profile": "query_tool_reverse", "container_ids": trace_cids[n * 10:][:10]})
        # Then every one is answered
        assert status == 200 and answer["parent_map"], answer
        if client.exists(f"{settings.key_prefix}:trace:lineage:{answer['query_id']}"):
            kept.append(answer["query_id"])
        # but what is kept is charged to them, and never past the budget
        assert spent("tree-reader") <= TINY
    # the answers past it were not kept (the events stage recomputes such a lineage)
    assert 5 <= len(kept) < 10, kept
    assert spent("tree-reader") > TINY - 8_000


@pytest.fixture(scope="module")
def big_jobs(api_settings, tmp_path_factory):
    """gunicorn (one gevent worker) and two trace workers over the scale-0.1 sample, with two
    completed jobs: rejects of every tool over two years (36,342 rows, 21 MB of JSON: the
    issue's) and a trace of 3,000 CIDs over the five query-tool domains; (address, {name: the
    generic result's path}, the gunicorn worker's pid)."""
    settings = api_settings.replace(queue="budget-big", sqlite_path=str(cached_sample(0.1)))
    logs = tmp_path_factory.mktemp("big")
    chunks = {"TRACE_STREAM_BATCH_SIZE": "5000"}  # the default: stored chunks as large as in production
    supervisor = start_supervisor(settings, logs / "workers.log", processes=2, env=chunks)
    try:
        with running_api(settings, logs / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                         TRACEBUS_API_MAX_STREAMS_PER_CALLER="20", **chunks) as url:
            parts = urlsplit(url)
            address = parts.hostname, parts.port
            with sqlite3.connect(settings.sqlite_path) as db:
                tools = [r[0] for r in db.execute("SELECT DISTINCT EQUIPMENTID FROM DW_MES_LOTWIPHISTORY "
                                                  "WHERE EQUIPMENTID IS NOT NULL")]
            params = {"start_date": "2024-06-01", "end_date": "2026-05-31", "query_type": "rejects",
                      "equipment_ids": tools}
            status, rejects = _call(address, "POST", "/api/v1/jobs", READER, {"kind": "query-tool", "params": params})
            assert status == 202, rejects
            status, trace = _call(address, "POST", "/api/trace/events", READER,
                                  body(cids(settings.sqlite_path)[:3000], domains_=QUERY_TOOL))
            assert status == 202, trace
            paths = {"rejects": f"/api/job/{rejects['job_id']}/result?prefix=query-tool",
                     "trace": f"/api/job/{trace['job_id']}/result"}
            for job_id in (rejects["job_id"], trace["job_id"]):
                wait_for(lambda: _call(address, "GET", f"/api/job/{job_id}", READER)[1]["data"]["status"]
                         == "completed", 120, interval_s=0.2, message=f"job {job_id}")
            listener = psutil.Process(_listener(parts.port))
            [pid] = [p.pid for p in listener.children()] or [listener.pid]  # the worker, not the arbiter
            yield address, paths, pid
    finally:
        stop_process_group(supervisor)


READER = {"X-User-Id": "reader"}


def _listener(port: int) -> int:
    return next(c.pid for c in psutil.net_connections("tcp")
                if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid)


def _stalled_reader(address, path: str, first_bytes: int) -> socket.socket:
    """A GET of ``path`` whose first ``first_bytes`` are read, and nothing after."""
    sock = socket.create_connection(address, timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User-Id: reader\r\n\r\n".encode())
    got = b""
    while len(got) < first_bytes:
        piece = sock.recv(65536)
        assert piece, got[:300]
        got += piece
    assert got.startswith(b"HTTP/1.1 200"), got[:300]
    return sock


@pytest.mark.parametrize("job", ["rejects", "trace"])
def test_a_result_is_streamed_and_stalled_readers_cost_little(big_jobs, job):
    address, paths, pid = big_jobs
    path = paths[job]
    # Given the whole result read once (a query kind's answer: every row, in the statement's order)
    status, whole = _call(address, "GET", path, READER)
    assert status == 200, whole
    if job == "rejects":
        assert whole["data"]["total"] == len(whole["data"]["data"]) == 36_342
        days = [r["TXN_DAY"] for r in whole["data"]["data"]]
        assert days == sorted(days, reverse=True)
    else:
        assert sum(len(d["data"]) for d in whole["data"]["results"].values()) > 30_000
    del whole
    rss_before = psutil.Process(pid).memory_info().rss
    # When 10 readers each take its first 256 KB and stop reading
    readers = [_stalled_reader(address, path, 256 << 10) for _ in range(10)]
    try:
        rss_stalled = psutil.Process(pid).memory_info().rss
    finally:
        for sock in readers:
            sock.close()
    # Then the API worker holds at most 2 MB for each (a rejects answer built whole: 40 MB each)
    grown = (rss_stalled - rss_before) / 10 / 2**20
    print(f"{job}: API worker RSS {rss_before / 2**20:.1f} -> {rss_stalled / 2**20:.1f} MB: "
          f"{grown:.2f} MB per stalled reader")
    assert grown <= 2.0
