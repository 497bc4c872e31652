"""What one caller may cost the others, through a real gunicorn (issue 40): the proxy's proof
behind X-Forwarded-For, a query kind's result streamed from the worker-sorted chunks, and
the Redis bytes a caller's jobs and answers may hold (TRACE_USER_MAX_BYTES).
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
import redis

from tests.api_process import running_api
from tests.api_support import (QUERY_TOOL, api_settings, body, start_supervisor, stop_process_group,  # noqa: F401
                               trace_cids)
from tests.helpers import wait_for
from tracebus.jobs.budget import Budget
from tracebus.jobs.keys import JobKeys

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


def _held_bytes(client, prefix: str, job_ids) -> int:
    """What the keys of ``job_ids`` hold in Redis (MEMORY USAGE of each)."""
    total = 0
    for job_id in job_ids:
        for key in client.scan_iter(match=f"{prefix}:job:{{{job_id}*", count=1000):
            total += client.memory_usage(key) or 0
    return total


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
        assert _held_bytes(client, settings.key_prefix, jobs) < BUDGET * 1.25
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
    """gunicorn with a tiny per-user budget and no worker; (address, settings)."""
    settings = api_settings.replace(queue="budget-tiny")
    with running_api(settings, tmp_path_factory.mktemp("tiny") / "gunicorn.log", TRACEBUS_API_WORKERS="1",
                     TRACE_USER_MAX_BYTES=str(TINY)) as url:
        parts = urlsplit(url)
        yield (parts.hostname, parts.port), settings


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
