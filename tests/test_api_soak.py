"""Sustained and hostile traffic through a real gunicorn (gevent, one worker: the hardest case)
(issue 24, item 8): a thousand submits from many callers, hundreds of event streams, streams
nobody reads and a body that never arrives, while the other routes keep answering and the
worker's memory stays bounded. Kept to tens of seconds.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import psutil
import pytest

from api.gunicorn_errors import MAX_HEADER_FIELD_BYTES, MAX_HEADER_FIELDS, MAX_REQUEST_LINE
from tests.api_process import running_api
from tests.api_support import api_settings, body, trace_cids  # noqa: F401

MAX_STREAMS = 60


@pytest.fixture(scope="module")
def api(api_settings, tmp_path_factory):
    """One gunicorn for the module: the hostile requests of the later tests meet the server the
    soak left (its streams closed, its jobs still queued), which is no easier than a fresh one."""
    settings = api_settings.replace(queue="soak-idle")  # no worker reads it: jobs stay queued
    with running_api(settings, tmp_path_factory.mktemp("soak") / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                     TRACEBUS_API_MAX_STREAMS=str(MAX_STREAMS),
                     TRACEBUS_API_MAX_STREAMS_PER_CALLER="10", TRACEBUS_API_BODY_TIMEOUT_S="2",
                     TRACE_USER_MAX_INFLIGHT="5", TRACEBUS_API_SSE_HEARTBEAT_SECONDS="2") as url:
        parts = urlsplit(url)
        yield parts.hostname, parts.port


def _request(address, method: str, path: str, user: str, payload=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(*address, timeout=30)
    try:
        data = json.dumps(payload).encode() if payload is not None else None
        conn.request(method, path, body=data, headers={"X-User-Id": user, "Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw.startswith(b"{") else {})
    finally:
        conn.close()


def _worker_rss_mb(port: int) -> float:
    """RSS of the gunicorn worker serving ``port`` (the arbiter's only child)."""
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            arbiter = psutil.Process(conn.pid)
            if arbiter.children():
                return arbiter.children()[0].memory_info().rss / 2**20
            return arbiter.memory_info().rss / 2**20
    raise AssertionError("no gunicorn on the port")


def _open_stream(address, path: str, user: str) -> tuple[socket.socket, int]:
    """A GET whose body is never read: (socket, status)."""
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User-Id: {user}\r\n\r\n".encode())
    head = sock.recv(256)
    return sock, int(head.split(b" ", 2)[1])


def test_a_thousand_submits_then_hundreds_of_streams_leave_every_route_answering(api, trace_cids):
    rss_start = _worker_rss_mb(api[1])
    # Given 1,000 async submits from 200 callers, 20 at a time: 5 different requests each (their
    # in-flight quota; a caller's identical requests would be deduplicated into one job)
    payloads = [(f"soak-{n % 200}", body(trace_cids[n // 200 * 50 + n % 50:][:201])) for n in range(1000)]
    assert len({(user, tuple(b["container_ids"])) for user, b in payloads}) == 1000
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda p: _request(api, "POST", "/api/trace/events", p[0], p[1]), payloads))
    statuses = [s for s, _ in answers]
    # Then every one was accepted (202) as a job of its own, none ran out of connections (503)
    assert statuses.count(202) == 1000, {s: statuses.count(s) for s in set(statuses)}
    assert len({answer["job_id"] for _, answer in answers}) == 1000
    jobs = {}
    for (user, _), (_, answer) in zip(payloads, answers):
        jobs.setdefault(user, answer["job_id"])

    # When 300 event streams are opened by 60 callers and left open
    streams = [_open_stream(api, f"/api/trace/job/{jobs[f'soak-{n % 60}']}/events", f"soak-{n % 60}")
               for n in range(300)]
    opened = [s for _, s in streams]
    try:
        # Then the worker holds at most its cap, refuses the rest with 503 (or 429 past a
        # caller's own cap), and the other routes still answer
        assert opened.count(200) == MAX_STREAMS, {s: opened.count(s) for s in set(opened)}
        assert set(opened) <= {200, 429, 503}
        for user in ("soak-1", "soak-77", "soak-150"):
            assert _request(api, "GET", f"/api/trace/job/{jobs[user]}", user)[0] == 200
            assert _request(api, "GET", "/api/v1/jobs", user)[0] == 200
        assert _request(api, "POST", "/api/trace/events", "soak-new", body(trace_cids[:201]))[0] == 202
        rss_open = _worker_rss_mb(api[1])
    finally:
        for sock, _ in streams:
            sock.close()
    # and once they are gone (noticed at their next heartbeat, 2 s here), new streams are served again
    deadline = time.monotonic() + 15
    while True:
        sock, status = _open_stream(api, f"/api/trace/job/{jobs['soak-3']}/events", "soak-3")
        sock.close()
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200
    assert rss_open - rss_start < 150, (rss_start, rss_open)


def test_identical_submits_sent_at_once_through_gunicorn_are_one_job(api, trace_cids):
    # Given one caller's identical async request sent 20 times at once
    payload = body(trace_cids[-250:])
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: _request(api, "POST", "/api/trace/events", "twins", payload), range(20)))
    # Then each is accepted as the same job (single flight), and the caller has quota left
    assert [s for s, _ in answers] == [202] * 20, answers
    assert len({answer["job_id"] for _, answer in answers}) == 1
    other = _request(api, "POST", "/api/trace/events", "twins", body(trace_cids[-249:]))
    assert other[0] == 202 and other[1]["job_id"] != answers[0][1]["job_id"]


def test_a_body_shorter_than_its_content_length_is_cut_off_with_a_408(api):
    sock = socket.create_connection(api, timeout=15)
    sock.sendall(b"POST /api/trace/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User-Id: slow-body\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"profile\"")
    t0 = time.monotonic()
    answer = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    took = time.monotonic() - t0
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"TRACEBUS_API_BODY_TIMEOUT_S" in answer
    assert 1.5 < took < 8, took  # the deadline is 2 s, and the connection is closed after it


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET /" + b"a" * MAX_REQUEST_LINE + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % n for n in range(MAX_HEADER_FIELDS + 1))
     + b"\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"y" * MAX_HEADER_FIELD_BYTES + b"\r\n\r\n", 431),
    (b"NOT A REQUEST LINE\r\n\r\n", 400),
])
def test_gunicorns_own_errors_are_json(api, request_bytes, status):
    """Past the limits the OpenAPI document states (api.gunicorn_errors), gunicorn answers itself, in JSON."""
    sock = socket.create_connection(api, timeout=10)
    sock.sendall(request_bytes)
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    sock.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), head
    assert b"Content-Type: application/json" in head and b"X-Content-Type-Options: nosniff" in head
    error = json.loads(payload)["error"]
    assert error["code"] and error["message"]
