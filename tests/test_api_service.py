"""Cross-cutting behaviour of the app: users and tokens, probes, Redis down, the error envelope.

Redis down is a real app pointed at a port where nothing listens.
"""

from __future__ import annotations

import itertools
import random

import falcon
import pytest
from falcon import testing

from api.app import create_app
from tests.api_support import (api_broker, api_settings, body, client, idle_client, make_client,  # noqa: F401
                               submit, trace_cids, trace_workers, user)
from tests.redis_server import free_port
from tracebus.engine.broker import Broker
from tracebus.errors import ConfigError

TOKENS = "t-alice:alice, t-bob:bob"


@pytest.fixture
def down(api_settings):
    """An app whose Redis is a closed port."""
    settings = api_settings.replace(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    broker = Broker(settings)
    yield testing.TestClient(create_app(settings, broker))
    broker.close()


def test_healthz_answers_without_redis(down):
    resp = down.simulate_get("/healthz")

    assert resp.status_code == 200 and resp.json == {"status": "ok"}


def test_readyz_is_200_with_redis_and_a_live_worker_on_the_trace_queue(client):
    resp = client.simulate_get("/readyz")

    assert resp.status_code == 200, resp.text
    assert resp.json["status"] == "ready" and resp.json["workers"] >= 2 and resp.json["missing"] == []


def test_readyz_is_503_naming_what_is_missing(idle_client, down):
    no_workers = idle_client.simulate_get("/readyz")  # nobody reads the idle queue
    no_redis = down.simulate_get("/readyz")

    assert no_workers.status_code == no_redis.status_code == 503
    assert no_workers.json["missing"] == ["workers"] and no_workers.json["redis"] == "ok"
    assert no_redis.json["missing"] == ["redis"] and no_redis.json["redis"].startswith("unreachable")


#: A job id of the right shape (a malformed one is 404 before Redis is asked).
_JOB = "trace-evt-" + "0" * 24


@pytest.mark.parametrize("method, path", [
    ("GET", f"/api/trace/job/{_JOB}"),
    ("GET", f"/api/trace/job/{_JOB}/result?domain=history"),
    ("GET", f"/api/trace/job/{_JOB}/stream"), ("GET", f"/api/trace/job/{_JOB}/events"),
    ("GET", "/api/v1/jobs"), ("GET", f"/api/v1/jobs/{_JOB}"), ("POST", f"/api/v1/jobs/{_JOB}/cancel"),
    ("POST", f"/api/v1/jobs/{_JOB}/retry"),
])
def test_redis_down_is_503_service_unavailable_with_retry_after(down, method, path):
    resp = down.simulate_request(method, path)

    assert resp.status_code == 503, resp.text
    assert resp.json["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert int(resp.headers["retry-after"]) > 0


def test_with_redis_down_an_async_trace_is_503_and_a_sync_one_still_answers(down, trace_cids):
    async_ = down.simulate_post("/api/trace/events", json=body(trace_cids[:300]))
    sync = down.simulate_post("/api/trace/events", json=body(trace_cids[:20]))

    assert async_.status_code == 503 and async_.json["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert sync.status_code == 200  # the synchronous path needs only the source


def test_with_tokens_a_request_without_a_valid_bearer_is_401(api_settings, api_broker):
    # No trusted proxy: the user header is no identity either.
    client = make_client(api_settings, api_broker, api_tokens=TOKENS, queue="idle-queue",
                         trusted_proxies="")

    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic dC1hbGljZQ=="},
                    {"Authorization": "Bearer"}, {"X-User-Id": "alice"}):
        resp = client.simulate_get("/api/v1/jobs", headers=headers)
        assert resp.status_code == 401, headers
        assert resp.json["error"]["code"] == "UNAUTHORIZED"
        assert resp.headers["www-authenticate"].startswith("Bearer")
    for open_path in ("/healthz", "/readyz", "/openapi.json"):
        assert client.simulate_get(open_path).status_code in (200, 503)


def test_with_tokens_a_trusted_proxy_names_the_user_only_with_its_proof(api_settings, api_broker):
    # issue 24: any local process shares the proxy's address, so the address alone is no proof
    client = make_client(api_settings, api_broker, api_tokens=TOKENS, queue="idle-queue",
                         trusted_proxies="127.0.0.1", proxy_token="proxy-s3cret")
    unproven = make_client(api_settings, api_broker, api_tokens=TOKENS, queue="idle-queue",
                           trusted_proxies="127.0.0.1")

    alice = {"X-User-Id": "alice"}
    assert client.simulate_get("/api/v1/jobs", headers={**alice, "X-Proxy-Token": "proxy-s3cret"}).status_code == 200
    for headers in (alice, {**alice, "X-Proxy-Token": "guess"}):
        resp = client.simulate_get("/api/v1/jobs", headers=headers)
        assert resp.status_code == 401 and "X-Proxy-Token" in resp.json["error"]["message"], resp.json
    resp = unproven.simulate_get("/api/v1/jobs", headers=alice)
    assert resp.status_code == 401 and "TRACEBUS_PROXY_TOKEN" in resp.json["error"]["message"]
    assert client.simulate_get("/api/v1/jobs").status_code == 401  # no identity at all


def test_with_tokens_the_token_decides_the_user(api_settings, api_broker, trace_cids, tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# token:user\nt-carol:carol\n\n")
    client = make_client(api_settings, api_broker, api_tokens=TOKENS, api_tokens_file=str(tokens_file),
                         queue="idle-queue")
    alice, bob = {"Authorization": "Bearer t-alice"}, {"Authorization": "Bearer t-bob", "X-User-Id": "alice"}

    job = submit(client, trace_cids[:300], **alice, **{"X-User-Id": "bob"})

    assert client.simulate_get(f"/api/trace/job/{job}", headers=alice).json["user"] == "alice"
    assert client.simulate_get(f"/api/trace/job/{job}", headers=bob).status_code == 404
    assert client.simulate_get("/api/v1/jobs", headers={"Authorization": "Bearer t-carol"}).json["total"] == 0


def test_malformed_token_settings_fail_at_startup(api_settings, api_broker, tmp_path):
    for overrides in ({"api_tokens": "no-colon-here"}, {"api_tokens": "t:"},
                      {"api_tokens_file": str(tmp_path / "missing")}):
        with pytest.raises(ConfigError):
            create_app(api_settings.replace(**overrides), api_broker)


def test_without_a_user_header_the_user_is_anonymous_and_a_bad_one_is_400(api_settings, api_broker,
                                                                          trace_cids):
    anonymous = make_client(api_settings, api_broker, queue="idle-queue")
    job = submit(anonymous, trace_cids[:300], ["holds"])

    assert anonymous.simulate_get(f"/api/trace/job/{job}").json["user"] == "anon:127.0.0.1"
    resp = anonymous.simulate_get("/api/v1/jobs", headers={"X-User-Id": "x" * 129})
    assert resp.status_code == 400 and "X-User-Id" in resp.json["error"]["message"]


def test_unknown_routes_and_methods_answer_in_the_envelope(client):
    missing = client.simulate_get("/api/trace/nope")
    wrong = client.simulate_delete("/api/trace/events")

    assert missing.status_code == 404 and missing.json["error"]["code"] == "NOT_FOUND"
    assert wrong.status_code == 405 and wrong.json["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert "POST" in wrong.headers["allow"]


def test_an_unexpected_error_is_a_500_envelope_without_a_traceback(api_settings, api_broker):
    class Broken:
        def on_get(self, req, resp):
            raise KeyError("secret internals")

    app = create_app(api_settings, api_broker)
    app.add_route("/broken", Broken())

    resp = testing.TestClient(app).simulate_get("/broken")

    assert resp.status_code == 500
    assert resp.json == {"error": {"code": "INTERNAL_ERROR", "message": "internal error; it has been logged"}}


def test_nothing_a_client_sends_produces_a_5xx(client, trace_cids):
    rng = random.Random(7)
    job = submit(client, trace_cids[:300])
    paths = ["/api/trace/events", f"/api/trace/job/{job}", f"/api/trace/job/{job}/result",
             f"/api/trace/job/{job}/stream", "/api/v1/jobs", f"/api/v1/jobs/{job}",
             f"/api/v1/jobs/{job}/cancel",
             f"/api/v1/jobs/{job}/retry", "/api/trace/job/%00/result", "/api/v1/jobs/%FF%FE"]
    bodies = [b"", b"null", b"{}", b"[]", b"\x00\x01\x02", bytes(rng.getrandbits(8) for _ in range(200)),
              b'{"profile": {}, "container_ids": {}, "domains": {}}', b'{"profile": "query_tool", '
              b'"container_ids": [null], "domains": [null]}', b'{"params": {"a": NaN}}']
    queries = ["", "domain=history&offset=99999999999999999999", "limit=-0&offset=+1", "partial=2&domain=",
               "status=&offset=1.5", "domain=%00"]
    for method, path, payload, query in itertools.product(("GET", "POST", "PUT"), paths, bodies, queries):
        if path.endswith("/events") or (method == "GET" and path.endswith("/stream")):
            continue
        resp = client.simulate_request(method, path, body=payload, query_string=query,
                                       headers={"X-User-Id": "fuzz\x7f" if rng.random() < 0.1 else "fuzz"})
        assert resp.status_code < 500, (method, path, payload, query, resp.text)
        assert falcon.MEDIA_JSON in resp.headers.get("content-type", ""), (method, path)
        assert "error" in resp.json or resp.status_code < 300
