"""The dashboard's job contracts over HTTP through a real gunicorn (issue 11).

One system (redis-server, the worker supervisor, gunicorn with one worker so its RSS can be
watched) serves the module; a second gunicorn over the same Redis has the envelope on.
Clients at other addresses are simulated by binding the client socket to another loopback
address (127.0.0.2, ...): Linux routes all of 127.0.0.0/8 to lo, and only 127.0.0.1 is a
trusted proxy here. The 12,000-CID job uses the scale-0.22 sample of test_e2e_http.py.
"""

from __future__ import annotations

import http.client
import json
import threading
import time

import orjson
import psutil
import pytest

from tests.api_process import serving
from tests.redis_server import free_port
from tests.test_e2e_http import System, e2e_db  # noqa: F401  (fixture)
from tracebus.trace.synth import cids

#: Addresses clients connect from; only the first is a trusted proxy.
PROXY, STRANGER, OTHER_STRANGER = "127.0.0.1", "127.0.0.2", "127.0.0.3"
ENV = {"TRACEBUS_TRUSTED_PROXIES": PROXY, "TRACE_ASYNC_CID_THRESHOLD": "200", "TRACE_USER_MAX_INFLIGHT": "1",
       "TRACEBUS_API_WORKERS": "1", "TRACEBUS_RATE_LIMITS": "trace-events=5/60,trace-job-status=100000/60"}
#: Enough CIDs for a full result of history and holds over 40 MB (about 47 MB; it was 20,000
#: CIDs, 77 MB), the size the API worker's flat memory is measured against.
BIG_CIDS = 12_000
PAGE_ROWS = 10_000


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self):
        return orjson.loads(self.body)


def request(port: int, method: str, path: str, payload=None, headers: dict | None = None,
            source: str = PROXY, timeout_s: float = 60.0) -> Answer:
    """One HTTP request from ``source`` (a loopback address) to gunicorn on ``port``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s, source_address=(source, 0))
    try:
        body = json.dumps(payload).encode() if payload is not None else None
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def trace(container_ids, domains=("history",)) -> dict:
    return {"profile": "query_tool", "container_ids": list(container_ids), "domains": list(domains)}


class JobFailed(Exception):
    """What the dashboard's poller throws (errorCode JOB_FAILED)."""

    def __init__(self, status: dict):
        super().__init__(status.get("error") or "非同步查詢失敗")
        self.status = status


def poll_job_until_complete(get, status_url: str, interval_s: float = 0.2, max_s: float = 60.0):
    """useAsyncJobPolling.ts::pollJobUntilComplete, line for line: unwrap ``data`` if present,
    stop on finished/completed, throw on failed, else keep polling. Returns (status, polls)."""
    started, polls = time.monotonic(), 0
    while True:
        raw = get(status_url).json
        polls += 1
        status = raw.get("data", raw) if isinstance(raw, dict) else raw
        if status["status"] in ("finished", "completed"):
            return status, polls
        if status["status"] == "failed":
            raise JobFailed(status)
        if time.monotonic() - started > max_s:
            raise AssertionError(f"JOB_POLL_TIMEOUT after {polls} polls; last status {status}")
        time.sleep(interval_s)


@pytest.fixture(scope="module")
def system(e2e_db, tmp_path_factory):  # noqa: F811
    running = System(tmp_path_factory.mktemp("contracts"), e2e_db, **ENV)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def enveloped(system, tmp_path_factory):
    """A second gunicorn over the same Redis and prefix, with TRACEBUS_API_ENVELOPE=1."""
    port = free_port()
    env = {**system.env, "TRACEBUS_API_ENVELOPE": "1", "TRACEBUS_API_BIND": f"127.0.0.1:{port}"}
    env.pop("TRACEBUS_METRICS_DIR", None)
    log = tmp_path_factory.mktemp("enveloped") / "gunicorn.log"
    with serving(env, log):
        yield port


@pytest.fixture(scope="module")
def big_cids(e2e_db) -> list[str]:  # noqa: F811
    return cids(e2e_db)


def test_a_cancelled_job_stops_the_dashboards_poller_at_once_with_job_cancelled(system, big_cids):
    user = {"X-User-Id": "canceller"}
    accepted = request(system.port, "POST", "/api/trace/events", trace(big_cids[:8000], ["history", "jobs"]),
                       user).json
    cancelled = request(system.port, "POST", f"/api/v1/jobs/{accepted['job_id']}/cancel", headers=user)
    assert cancelled.status == 200 and cancelled.json["status"] == "cancelled", cancelled.body

    with pytest.raises(JobFailed) as failed:
        poll_job_until_complete(lambda url: request(system.port, "GET", url, headers=user),
                                accepted["status_url"])

    status = failed.value.status
    assert status["code"] == "JOB_CANCELLED" and status["state"] == "cancelled" and str(failed.value)
    assert status["progress"] == "cancelled" and "units_total" in status["progress_detail"]
    listed = request(system.port, "GET", "/api/v1/jobs?status=cancelled", headers=user).json
    assert [j["status"] for j in listed["jobs"]] == ["cancelled"]


def test_a_user_header_from_an_untrusted_address_is_ignored(system, big_cids):
    alice = request(system.port, "POST", "/api/trace/events", trace(big_cids[:300]), {"X-User-Id": "alice"})
    spoofed = request(system.port, "POST", "/api/trace/events", trace(big_cids[300:600]),
                      {"X-User-Id": "alice", "X-Forwarded-For": "10.9.9.9"}, source=STRANGER)
    assert alice.status == spoofed.status == 202, (alice.body, spoofed.body)
    job, spoofed_job = alice.json["job_id"], spoofed.json["job_id"]

    mine = request(system.port, "GET", f"/api/trace/job/{spoofed_job}", source=STRANGER).json
    stolen = request(system.port, "GET", f"/api/trace/job/{job}", headers={"X-User-Id": "alice"},
                     source=STRANGER)

    assert request(system.port, "GET", f"/api/trace/job/{job}", headers={"X-User-Id": "alice"}).json["user"] == "alice"
    assert mine["user"] == f"anon:{STRANGER}"  # neither the header nor X-Forwarded-For believed
    assert stolen.status == 404 and stolen.json["error"]["code"] == "JOB_NOT_FOUND"


def test_two_anonymous_clients_behind_the_proxy_have_separate_quotas(system, big_cids):
    a, b = {"X-Forwarded-For": "203.0.113.1, 10.0.0.1"}, {"X-Forwarded-For": "203.0.113.2"}
    first = request(system.port, "POST", "/api/trace/events", trace(big_cids[1000:9000], ["history", "jobs"]), a)
    second = request(system.port, "POST", "/api/trace/events", trace(big_cids[9000:9300]), a)
    other = request(system.port, "POST", "/api/trace/events", trace(big_cids[9300:9600]), b)
    stranger = request(system.port, "POST", "/api/trace/events", trace(big_cids[9600:9900]), a,
                       source=OTHER_STRANGER)  # X-Forwarded-For from an untrusted peer: its own address

    assert first.status == 202, first.body
    assert second.status == 429 and second.json["error"]["code"] == "QUOTA_EXCEEDED"
    assert other.status == 202 and stranger.status == 202, (other.body, stranger.body)
    owners = {request(system.port, "GET", f"/api/trace/job/{r.json['job_id']}", headers=h).json["user"]
              for r, h in ((first, a), (other, b))}
    assert owners == {"anon:203.0.113.1", "anon:203.0.113.2"}
    # Holding the id of an anonymous job is what grants access to it: anyone anonymous may cancel it.
    assert request(system.port, "POST", f"/api/v1/jobs/{first.json['job_id']}/cancel", headers=b).status == 200


def test_past_a_rate_limit_the_api_answers_429_with_retry_after(system):
    limited, other = {"X-User-Id": "hasty"}, {"X-User-Id": "patient"}
    answers = [request(system.port, "POST", "/api/trace/events", {"nope": 1}, limited) for _ in range(6)]

    assert [a.status for a in answers] == [400] * 5 + [429]
    assert answers[-1].json["error"]["code"] == "TOO_MANY_REQUESTS"
    assert 1 <= int(answers[-1].headers["retry-after"]) <= 60
    assert request(system.port, "POST", "/api/trace/events", {"nope": 1}, other).status == 400


def rss_while(pid: int, action):
    """(result of ``action()``, RSS before, peak RSS while it ran) of process ``pid``."""
    process, peak, done = psutil.Process(pid), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.01)
    before = process.memory_info().rss
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = action()
    finally:
        done.set()
        sampler.join()
    return result, before, max(peak[0], process.memory_info().rss)


def row_keys(rows) -> list[bytes]:
    return [orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in rows]


def test_the_full_result_of_a_12000_cid_job_is_its_pages_and_the_api_memory_stays_flat(system, big_cids):
    user, domains = {"X-User-Id": "big"}, ["history", "holds"]
    accepted = request(system.port, "POST", "/api/trace/events", trace(big_cids[:BIG_CIDS], domains), user).json
    status, _ = poll_job_until_complete(lambda url: request(system.port, "GET", url, headers=user),
                                        accepted["status_url"], interval_s=0.5, max_s=300)
    assert status["progress"] == "complete" and status["query_id"] == accepted["job_id"]
    result_url = f"{accepted['status_url']}/result"
    pages: dict[str, list[bytes]] = {}
    for domain in domains:
        pages[domain], offset = [], 0
        while offset is not None:
            page = request(system.port, "GET", f"{result_url}?domain={domain}&offset={offset}&limit={PAGE_ROWS}",
                           headers=user).json
            pages[domain] += row_keys(page["results"][domain]["data"])
            offset = page["next_offset"]
    worker = psutil.Process(system.processes["gunicorn"].pid).children()[0].pid
    request(system.port, "GET", f"{result_url}?domain=holds&limit=0", headers=user)  # warm up the path

    answer, before, peak = rss_while(worker, lambda: request(system.port, "GET", result_url, headers=user,
                                                             timeout_s=300))

    assert answer.status == 200 and answer.headers["content-type"].startswith("application/json")
    body_mb, grown_mb = len(answer.body) / 2**20, (peak - before) / 2**20
    full = orjson.loads(answer.body)
    del answer
    assert set(full["results"]) == set(domains) and full["query_id"] == accepted["job_id"]
    assert full["quality_meta"]["status"] == "complete" and "failed_domains" not in full
    for domain in domains:
        got = full["results"][domain]
        assert got["count"] == got["total"] == len(pages[domain]) > 0
        assert got["quality_meta"] == full["domain_quality_meta"][domain]
        assert row_keys(got["data"]) == pages[domain], domain
    print(f"\nfull result {body_mb:.0f} MB; the API worker grew {grown_mb:.1f} MB while streaming it")
    assert body_mb > 40 and grown_mb < 25, (body_mb, grown_mb)


def test_with_the_envelope_on_json_answers_are_wrapped_and_streams_are_not(system, enveloped, big_cids):
    user = {"X-User-Id": "wrapped"}
    accepted = request(enveloped, "POST", "/api/trace/events", trace(big_cids[20000:20400]), user).json
    assert accepted["success"] is True and set(accepted["meta"]) >= {"timestamp", "app_version"}
    job = accepted["data"]
    status, _ = poll_job_until_complete(lambda url: request(enveloped, "GET", url, headers=user),
                                        job["status_url"])
    bare = request(system.port, "GET", job["status_url"], headers=user).json
    full = request(enveloped, "GET", f"{job['status_url']}/result", headers=user).json
    missing = request(enveloped, "GET", "/api/trace/job/trace-evt-000000000000000000000000", headers=user).json
    stream = request(enveloped, "GET", job["stream_url"], headers=user)
    sync = request(enveloped, "POST", "/api/trace/events", trace(big_cids[:5]), user).json

    assert status["status"] == bare["status"] == "completed" and "success" not in bare
    assert full["success"] is True and full["data"]["results"]["history"]["total"] > 0
    assert missing["success"] is False and missing["error"]["code"] == "JOB_NOT_FOUND" and missing["meta"]
    assert json.loads(stream.body.splitlines()[0])["type"] == "meta"
    assert sync["success"] is True and sync["data"]["stage"] == "events"
    assert request(enveloped, "GET", "/healthz").json == {"status": "ok"}
    document = request(enveloped, "GET", "/openapi.json").json
    assert "openapi" in document and "success" not in document
