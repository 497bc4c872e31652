"""The dashboard's contracts in the app (falcon TestClient over the real Redis and workers):
identity, rate limits, the full result, the dashboard status view. The same contracts over
a real gunicorn are in test_e2e_contracts.py."""

from __future__ import annotations

import json

import pytest

from api.keys import ApiKeys

from api.identity import client_address, is_trusted, parse_networks
from api.ratelimit import DEFAULT_LIMITS, Limit, RateLimited, RateLimiter, parse_limits
from tests.api_support import (api_broker, api_settings, client, idle_client, make_client,  # noqa: F401
                               page_all, submit, trace_cids, trace_workers, user, wait_job)
from tracebus.errors import ConfigError
from tracebus.trace.dashview import dashboard_status, progress_text
from tracebus.trace.owners import may_access


def test_trusted_proxies_are_addresses_or_cidrs_and_a_bad_entry_fails_at_startup():
    networks = parse_networks("10.0.0.0/8, 127.0.0.1,::1")

    assert is_trusted("10.2.3.4", networks) and is_trusted("::ffff:127.0.0.1", networks)
    assert not is_trusted("127.0.0.2", networks) and not is_trusted(None, networks)
    assert not is_trusted("10.0.0.1", parse_networks(""))
    with pytest.raises(ConfigError, match="TRACEBUS_TRUSTED_PROXIES"):
        parse_networks("10.0.0.0/8,proxy.local")


def test_the_client_address_is_the_first_forwarded_entry_only_from_a_trusted_peer():
    assert client_address("127.0.0.1", "203.0.113.9, 10.0.0.1", trusted=True) == "203.0.113.9"
    assert client_address("127.0.0.2", "203.0.113.9", trusted=False) == "127.0.0.2"
    assert client_address("127.0.0.1", "garbage", trusted=True) == "127.0.0.1"


def test_an_anonymous_job_is_open_to_anonymous_callers_holding_its_id_and_a_named_one_is_private():
    assert may_access("anon:10.0.0.1", "anon:10.0.0.2") and may_access("alice", "alice")
    assert not may_access("alice", "anon:10.0.0.1") and not may_access("anon:10.0.0.1", "bob")


def test_rate_limit_specs_override_the_original_defaults():
    limits = parse_limits("trace-events=2/10, msd-export=0")

    assert limits["trace-events"] == Limit(2, 10) and limits["msd-export"] == Limit(0, 60)
    assert limits["trace-job-status"] == DEFAULT_LIMITS["trace-job-status"] == Limit(60, 60)
    assert all(limit.max_hits == 0 for limit in parse_limits("off").values())
    # A bucket a kind's own route declares (the equipment-period query's) has its default and is set alike.
    assert parse_limits("")["query-tool-equipment"] == Limit(30, 60)
    assert parse_limits("query-tool-equipment=5/10")["query-tool-equipment"] == Limit(5, 10)
    for bad in ("nope=1/60", "trace-events=x/60", "trace-events=1/0"):
        with pytest.raises(ConfigError, match="TRACEBUS_RATE_LIMITS"):
            parse_limits(bad)


def test_a_rate_limit_window_lives_in_redis_per_caller_and_expires(api_broker):
    limiter = RateLimiter(api_broker.client, ApiKeys(api_broker.keys.prefix), parse_limits("trace-events=2/30"))
    limiter.hit("trace-events", "carol")
    limiter.hit("trace-events", "carol")
    limiter.hit("trace-events", "dave")

    with pytest.raises(RateLimited) as blocked:
        limiter.hit("trace-events", "carol")

    assert blocked.value.code == "TOO_MANY_REQUESTS" and 1 <= blocked.value.retry_after_s <= 30
    key = ApiKeys(api_broker.keys.prefix).rate("trace-events", "carol")
    assert int(api_broker.client.get(key)) == 3  # blocked hits count too
    assert 0 < api_broker.client.ttl(key) <= 30


def test_routes_are_rate_limited_by_bucket_and_answer_429_with_retry_after(api_settings, api_broker, user):
    app = make_client(api_settings, api_broker, user, rate_limits="trace-job-status=2/60", queue="idle-queue")

    codes = [app.simulate_get("/api/trace/job/trace-evt-0").status_code for _ in range(3)]
    listing = app.simulate_get("/api/v1/jobs")  # no bucket

    assert codes == [404, 404, 429] and listing.status_code == 200
    blocked = app.simulate_get("/api/trace/job/trace-evt-0")
    assert blocked.json["error"]["code"] == "TOO_MANY_REQUESTS" and int(blocked.headers["retry-after"]) >= 1


def test_the_full_result_is_every_domain_in_the_original_shape_and_equals_the_pages(client, trace_cids):
    domains = ["history", "holds"]
    job = submit(client, trace_cids[:450], domains)
    wait_job(client, job)

    full = json.loads(client.simulate_get(f"/api/trace/job/{job}/result").text)
    sliced = json.loads(client.simulate_get(f"/api/trace/job/{job}/result",
                                            params={"domain": "history", "offset": 7, "limit": 0}).text)

    assert full["stage"] == "events" and full["aggregation"] is None and full["query_id"] == job
    assert full["quality_meta"] == {"status": "complete", "scope": "query", "reasons": []}
    for domain in domains:
        pages = page_all(client, job, domain, limit=333)
        assert full["results"][domain]["data"] == pages
        assert full["results"][domain]["count"] == full["results"][domain]["total"] == len(pages)
        assert full["domain_quality_meta"][domain]["observed_rows"] == len(pages)
    assert list(sliced["results"]) == ["history"]
    assert sliced["results"]["history"]["data"] == full["results"]["history"]["data"][7:]
    # a typo, or a domain the job did not ask for, is a 404 naming the job's domains, not `{}`
    for other in ("weather", "materials"):
        for limit in ({}, {"limit": 0}, {"limit": 5}):
            resp = client.simulate_get(f"/api/trace/job/{job}/result", params={"domain": other, **limit})
            assert resp.status_code == 404, (other, limit, resp.text)
            assert "history, holds" in resp.text and "domain" in resp.text


def test_the_full_result_of_a_running_job_is_409(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])

    resp = idle_client.simulate_get(f"/api/trace/job/{job}/result")

    assert resp.status_code == 409 and resp.json["error"]["code"] == "JOB_NOT_COMPLETE"


def test_the_dashboard_view_has_a_progress_string_and_a_cancelled_job_is_failed():
    detail = {"units_done": 3, "units_failed": 1, "units_total": 10, "rows": 5, "stage": "fetching events"}
    doc = {"job_id": "j", "status": "cancelled", "state": "cancelled", "progress": detail, "error": None}

    view = dashboard_status(doc)

    assert [progress_text(s, detail) for s in ("queued", "running", "completed", "partial")] == [
        "", "fetching events (4/10 units)", "complete", "complete"]
    assert (view["status"], view["code"], view["progress"]) == ("failed", "JOB_CANCELLED", "cancelled")
    assert view["error"] and view["progress_detail"] == detail and "query_id" not in view
