"""A kind with routes of its own is one folder and its registration line (issue 37, item 1).

The kind of tests/sample_kind/ (``kind.py`` registers it, ``http.py`` declares its routes: an
answer made now or a job, its job's status, a lookup), once registered, is served on its routes,
rate-limited in the bucket it declares with its default, and documented in /openapi.json (its
operations and its component schema), with no other change: real redis-server, the Falcon
TestClient over ``create_app``. Unregistered, none of it is there.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.api_support import api_broker, api_settings, make_client, user  # noqa: F401
from tracebus.errors import ConfigError
from tracebus.trace import kinds


@pytest.fixture
def sample_kind():
    module = importlib.import_module("tests.sample_kind.kind")  # the line tracebus/trace/installed.py would hold
    yield module.SAMPLE
    kinds._KINDS.pop("sample")
    kinds._BY_ACTOR.pop("sample_echo_unit")
    sys.modules.pop("tests.sample_kind.kind")


def test_a_registered_kind_is_served_limited_and_documented_from_its_folder(sample_kind, api_settings, api_broker,
                                                                            user):
    client = make_client(api_settings, api_broker, user, rate_limits="", queue="idle-queue")

    now = client.simulate_post("/api/sample/echo", json={"n": 3})
    assert now.status_code == 200 and now.json["data"] == {"echo": 3} and now.json["success"] is True
    limited = client.simulate_post("/api/sample/echo", json={"n": 3})
    assert limited.status_code == 429 and "sample-echo allows 1 requests per 60 s" in limited.text

    client = make_client(api_settings, api_broker, user, rate_limits="sample-echo=0", queue="idle-queue")
    assert client.simulate_post("/api/sample/echo", json={"n": "x"}).status_code == 400
    job = client.simulate_post("/api/sample/echo", json={"n": 11})
    assert job.status_code == 202 and job.json["data"]["job_id"].startswith("sample-echo-")
    assert job.headers["Location"] == job.json["data"]["status_url"]
    status = client.simulate_get(job.headers["Location"])  # dashboard route: bare under the suite's settings
    assert status.status_code == 200 and status.json["status"] == "queued", status.text

    values = client.simulate_get("/api/sample/values?v=a&v=b")
    assert values.json["data"] == {"values": ["a", "b"]} and values.json["meta"]["count"] == 2

    doc = client.simulate_get("/openapi.json").json
    post = doc["paths"]["/api/sample/echo"]["post"]
    assert post["summary"] == "Echo a number (a job above 10)"
    assert post["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["data"] == {
        "$ref": "#/components/schemas/SampleEcho"}  # always enveloped: documented so
    assert doc["components"]["schemas"]["SampleEcho"]["required"] == ["echo"]
    job_param = doc["paths"]["/api/sample/echo/job/{job_id}"]["get"]["parameters"][1]
    assert job_param["name"] == "job_id" and job_param["description"] == "`sample-echo-<24 hex>`"
    assert [p.get("name") for p in doc["paths"]["/api/sample/values"]["get"]["parameters"]][1:] == ["v"]


def test_an_unregistered_kind_has_no_route_bucket_or_document(api_settings, api_broker, user):
    client = make_client(api_settings, api_broker, user, rate_limits="")

    assert client.simulate_post("/api/sample/echo", json={"n": 1}).status_code == 404
    assert client.simulate_get("/api/sample/values").status_code == 404
    doc = client.simulate_get("/openapi.json").json
    assert "/api/sample/echo" not in doc["paths"] and "SampleEcho" not in doc["components"]["schemas"]
    with pytest.raises(ConfigError, match="unknown bucket 'sample-echo'"):
        make_client(api_settings, api_broker, user, rate_limits="sample-echo=1/60")
