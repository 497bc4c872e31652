"""What one caller may cost the others, through a real gunicorn (issue 40): the proxy's proof
behind X-Forwarded-For, a query kind's result streamed from the worker-sorted chunks, and
the Redis bytes a caller's jobs and answers may hold (TRACE_USER_MAX_BYTES).
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from tests.api_process import running_api
from tests.api_support import api_settings, trace_cids  # noqa: F401

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
