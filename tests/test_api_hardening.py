"""Hostile requests get clear answers (issue 24): identity is never taken from a header of an
untrusted peer, the Host must be one the API is served under, and the CLI's `up` trusts
nobody unless told.
"""

from __future__ import annotations

import pytest

from api.hosts import default_hosts, host_name
from tests.api_support import api_settings, api_broker, make_client, trace_cids  # noqa: F401
from tracebus.commands._up_banner import banner
from tracebus.trace import domains


@pytest.fixture
def plain(api_settings, api_broker):
    """The app with its default identity settings: no proxy trusted, no tokens."""
    return make_client(api_settings, api_broker, queue="idle-queue", trusted_proxies="")


def test_by_default_no_peer_may_name_a_user_or_a_client_address(plain):
    named = plain.simulate_get("/api/v1/me", headers={"X-User-Id": "alice"}).json
    forwarded = plain.simulate_get("/api/v1/me", headers={"X-Forwarded-For": "203.0.113.5"}).json
    assert named == {"user": "anon:127.0.0.1", "anonymous": True, "admin": False}
    assert forwarded["user"] == "anon:127.0.0.1"  # no rotating identities past quotas and rate limits


def test_a_host_outside_the_allow_list_is_a_400_before_anything_else(api_settings, api_broker):
    client = make_client(api_settings, api_broker, queue="idle-queue",
                         api_allowed_hosts=default_hosts("127.0.0.1"))
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000"):
        assert client.simulate_get("/api/v1/me", headers={"Host": host}).status_code == 200, host
    for host in ("attacker.example", "attacker.example:8000", "127.0.0.1.nip.io"):
        resp = client.simulate_get("/api/v1/me", headers={"Host": host})
        assert resp.status_code == 400, host
        assert resp.json["error"]["code"] == "INVALID_HOST"
    probe = client.simulate_get("/healthz", headers={"Host": "attacker.example"})
    assert probe.status_code == 400


def test_host_names_and_the_defaults_of_up():
    assert [host_name(h) for h in ("a.b:80", "A.B", "[::1]:8000", "::1", "")] == ["a.b", "a.b", "::1", "::1", ""]
    assert default_hosts("0.0.0.0") == "*" and default_hosts("::") == "*"
    assert default_hosts("10.1.2.3") == "10.1.2.3,localhost,127.0.0.1,::1"


def test_the_banner_of_up_says_whom_it_trusts(api_settings):
    untrusting = banner("http://127.0.0.1:8000", None, api_settings.replace(trusted_proxies=""), 1, 1.0)
    trusting = banner("http://127.0.0.1:8000", None, api_settings.replace(trusted_proxies="127.0.0.1,::1"), 1, 1.0)
    assert "No proxy is trusted" in untrusting
    assert "TRACEBUS_TRUSTED_PROXIES=127.0.0.1,::1: requests from there may name a user" in trusting


def test_json_answers_and_errors_are_never_cached_nor_sniffed(plain):
    for resp in (plain.simulate_get("/api/v1/me"), plain.simulate_get("/api/trace/job/trace-evt-" + "0" * 24),
                 plain.simulate_post("/api/trace/events", body="{")):
        assert resp.headers["content-type"].startswith("application/json"), resp.headers
        assert resp.headers["cache-control"] == "no-store"
        assert resp.headers["x-content-type-options"] == "nosniff"
    page = plain.simulate_get("/ui")
    assert page.headers["x-content-type-options"] == "nosniff"


def test_csv_cells_that_would_start_a_formula_are_neutralised():
    from tracebus.jobs import export
    from tracebus.trace.msd.job.detailstore import _cell

    assert [_cell(v) for v in ("=1+1", "+A1", "-2+3", "@SUM(A1)", "\tx", "ok", -5, 1.5, None)] == [
        "'=1+1", "'+A1", "'-2+3", "'@SUM(A1)", "'\tx", "ok", "-5", "1.5", ""]
    text = b"".join(export._csv([(["=HYPERLINK(1)", "n"], [["=cmd|' /C calc'!A0", -3], ["fine", 2]])], [])).decode()
    assert text == "'=HYPERLINK(1),n\r\n'=cmd|' /C calc'!A0,-3\r\nfine,2\r\n"


@pytest.mark.parametrize("path, body", [
    ("/api/trace/events", '{"profile": "query_tool", "container_ids": ["\\ud800"], "domains": ["history"]}'),
    ("/api/trace/seed-resolve", '{"profile": "mid_section_defect", "params": {"loss_reasons": ["\\udfff"]}}'),
    ("/api/trace/lineage", '{"profile": "query_tool", "container_ids": ["a\\ud800b"]}'),
    ("/api/v1/jobs", '{"kind": "\\ud800", "params": {}}'),
])
def test_a_lone_surrogate_anywhere_in_a_body_is_a_400_that_says_so(plain, path, body):
    resp = plain.simulate_post(path, body=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert resp.json["error"]["code"] == "INVALID_PARAMS"
    assert "surrogate" in resp.json["error"]["message"]


def test_a_paired_surrogate_is_a_character_like_any_other(plain):
    body = '{"profile": "query_tool", "container_ids": ["\\ud83d\\ude00"], "domains": ["history"]}'
    assert plain.simulate_post("/api/trace/events", body=body).status_code == 200


def _open(app, path: str, user: str):
    """Start a GET and leave its body unread (as a client that stopped reading): (status, body)."""
    from falcon import testing

    seen = {}
    body = app(testing.create_environ(path, headers={"X-User-Id": user}),
               lambda status, headers, exc_info=None: seen.setdefault("status", status))
    return int(seen["status"].split()[0]), body


def test_open_streams_are_capped_per_caller_and_per_worker_and_given_back_on_close(
        api_settings, api_broker, trace_cids):
    # Given an app allowing 3 open streams, 2 per caller, and a queued job of each caller
    from api.app import create_app
    from tests.api_support import submit

    settings = api_settings.replace(queue="idle-queue", api_max_streams=3, api_max_streams_per_caller=2)
    app = create_app(settings, api_broker)
    jobs = {u: submit(make_client(settings, api_broker, u), trace_cids[:300]) for u in ("s-ann", "s-ben")}

    def events(user):
        return _open(app, f"/api/trace/job/{jobs[user]}/events", user)

    # When ann opens 2 event streams and does not read them, her third is 429
    ann = [events("s-ann") for _ in range(2)]
    assert [s for s, _ in ann] == [200, 200]
    status, refused = events("s-ann")
    assert status == 429 and b"TRACEBUS_API_MAX_STREAMS_PER_CALLER" in b"".join(refused)
    # and once the worker holds 3, ben's second is 503, while other routes answer
    ben = events("s-ben")
    assert ben[0] == 200
    status, refused = events("s-ben")
    assert status == 503 and b"TRACEBUS_API_MAX_STREAMS" in b"".join(refused)
    client = make_client(settings, api_broker, "s-ben")
    assert client.simulate_get(f"/api/trace/job/{jobs['s-ben']}").status_code == 200
    assert client.simulate_get("/api/v1/jobs").status_code == 200

    # Then a closed stream (the client went) gives its slot back
    ann[0][1].close()
    assert events("s-ben")[0] == 200


def test_readyz_fails_when_the_producer_cannot_reach_redis(api_settings, api_broker):
    from api.app import create_app
    from falcon import testing
    from tracebus.engine.broker import Broker

    broken = Broker(api_settings.replace(redis_url="redis://127.0.0.1:1/0"))
    resp = testing.TestClient(create_app(api_settings, broken)).simulate_get("/readyz")
    assert resp.status_code == 503 and resp.json["missing"] == ["redis"]
    assert "Retry-After" in resp.headers


def test_params_of_more_than_64_kib_are_a_400(plain):
    body = {"profile": "mid_section_defect", "container_ids": ["C1"],
            "domains": ["upstream_history"], "params": {"loss_reasons": ["x" * (64 * 1024)]}}
    resp = plain.simulate_post("/api/trace/events", json=body)
    assert resp.status_code == 400 and "the limit is 65536" in resp.json["error"]["message"]


def test_only_the_params_a_profile_reads_are_kept_with_the_job(plain, api_settings, api_broker, trace_cids):
    from tracebus.jobs.store import JobStore

    assert set(domains.PARAM_KEYS) == set(domains.PROFILES)
    junk = {"junk": "x" * (64 * 1024), "direction": "forward"}
    resp = plain.simulate_post("/api/trace/events", json={
        "profile": "query_tool", "container_ids": trace_cids[:400], "domains": ["history"], "params": junk})
    assert resp.status_code == 202, resp.text
    assert JobStore(api_broker.client, api_settings).status(resp.json["job_id"])["app"]["params"] == {}
    # the MSD page sends the events stage its seed stage's params too: a container-mode
    # resolution of thousands of values must not make the events request too big
    values = [f"GA{i:012d}" for i in range(6000)]
    msd = {"mode": "container", "resolve_type": "lot_id", "values": values, "station": "測試",
           "direction": "backward", "loss_reasons": ["R1"], "nonsense": 1}
    resp = plain.simulate_post("/api/trace/events", json={
        "profile": "mid_section_defect", "container_ids": trace_cids[:50], "domains": ["upstream_history"],
        "params": msd})
    assert resp.status_code in (200, 202), resp.text
    stored = JobStore(api_broker.client, api_settings).status(resp.json["job_id"])["app"]["params"]
    assert stored == {"mode": "container", "station": "測試", "direction": "backward", "loss_reasons": ["R1"]}


def test_a_streamed_body_writes_under_the_write_timeout_and_gives_the_socket_back(api_settings, api_broker, trace_cids):
    import socket as socketlib

    from falcon import testing

    from api.app import create_app
    from tests.api_support import submit

    settings = api_settings.replace(queue="idle-queue", api_write_timeout_s=7)
    app = create_app(settings, api_broker)
    job = submit(make_client(settings, api_broker, "w-ann"), trace_cids[:300])
    ours, theirs = socketlib.socketpair()
    try:
        env = testing.create_environ(f"/api/trace/job/{job}/events", headers={"X-User-Id": "w-ann"})
        env["gunicorn.socket"] = ours
        body = app(env, lambda status, headers, exc_info=None: None)
        assert ours.gettimeout() == 7  # a client that stops reading fails the write after 7 s
        body.close()
        assert ours.gettimeout() is None  # keep-alive reads are gunicorn's again
    finally:
        ours.close()
        theirs.close()
