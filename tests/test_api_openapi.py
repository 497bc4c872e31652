"""The OpenAPI document: valid OpenAPI 3.1, lists exactly the app's routes, and describes
the bodies the app really sends (real responses are validated against its schemas)."""

from __future__ import annotations

import json

import falcon.inspect
import jsonschema
import pytest
from openapi_spec_validator import validate

from api.gunicorn_errors import MAX_HEADER_FIELD_BYTES, MAX_HEADER_FIELDS, MAX_REQUEST_LINE
from api.app import create_app
from api.openapi import document
from tests.api_support import (api_broker, api_settings, body, client, idle_client, make_client,  # noqa: F401
                               submit, trace_cids, trace_workers, user, wait_job)
from tests.helpers import wait_for


@pytest.fixture
def spec(api_settings) -> dict:
    return document(api_settings)


def conforms(spec: dict, schema: str, instance) -> None:
    """``instance`` is valid against ``#/components/schemas/<schema>`` of ``spec``."""
    root = {"$ref": f"#/components/schemas/{schema}", "components": spec["components"]}
    jsonschema.Draft202012Validator(root).validate(instance)


def test_the_document_is_valid_openapi(spec):
    validate(spec)


def test_the_document_lists_every_route_and_method_of_the_app_and_no_other(api_settings, api_broker, spec):
    app = create_app(api_settings, api_broker)
    served = {(route.path, m.method.lower()) for route in falcon.inspect.inspect_routes(app)
              for m in route.methods if not m.internal}

    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}

    assert served == documented


def test_the_served_document_is_the_one_built_from_the_settings(client, spec):
    resp = client.simulate_get("/openapi.json")

    assert resp.status_code == 200 and resp.json == json.loads(json.dumps(spec))


def test_real_responses_conform_to_the_documented_schemas(client, idle_client, spec, trace_cids):
    sync = client.simulate_post("/api/trace/events", json=body(trace_cids[:30], ["history", "holds"]))
    accepted = client.simulate_post("/api/trace/events", json=body(trace_cids[:300], ["history"]))
    job = accepted.json["job_id"]
    status = wait_job(client, job)
    queued = submit(idle_client, trace_cids[300:600])
    still_queued = submit(idle_client, trace_cids[600:900])

    conforms(spec, "SyncResult", json.loads(sync.text))
    conforms(spec, "Accepted", accepted.json)
    conforms(spec, "DashboardStatus", status)
    conforms(spec, "JobStatus", client.simulate_post(f"/api/v1/jobs/{queued}/cancel").json)
    cancelled = idle_client.simulate_get(f"/api/trace/job/{queued}").json
    conforms(spec, "DashboardStatus", cancelled)
    assert (cancelled["status"], cancelled["code"]) == ("failed", "JOB_CANCELLED")
    for params in ({}, {"domain": "history", "limit": 0}):
        full = client.simulate_get(f"/api/trace/job/{job}/result", params=params)
        conforms(spec, "FullResult", json.loads(full.text))
    conforms(spec, "JobDetail", client.simulate_get(f"/api/v1/jobs/{job}").json)
    conforms(spec, "JobList", client.simulate_get("/api/v1/jobs").json)
    conforms(spec, "ResultPage", client.simulate_get(f"/api/trace/job/{job}/result",
                                                     params={"domain": "history", "limit": 3}).json)
    conforms(spec, "Ready", client.simulate_get("/readyz").json)
    for resp in (idle_client.simulate_get(f"/api/trace/job/{still_queued}/result", params={"domain": "history"}),
                 client.simulate_get(f"/api/trace/job/{job}/result", params={"domain": "weather"}),
                 client.simulate_post("/api/trace/events", json={"profile": "nope"}),
                 client.simulate_get("/api/trace/job/trace-evt-0")):
        assert resp.status_code >= 400
        conforms(spec, "Error", resp.json)


def test_every_documented_error_status_has_the_error_schema(spec):
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert "200" in op["responses"] or "202" in op["responses"], (path, method)
            # gunicorn's own answers, before the app, on every route (JSON: api/gunicorn_errors.py)
            assert "414" in op["responses"] and "431" in op["responses"], (path, method)
            # with the limits gunicorn is given (api/gunicorn.conf.py sets them from the same constants)
            assert f"{MAX_REQUEST_LINE} bytes" in op["responses"]["414"]["description"]
            assert f"{MAX_HEADER_FIELDS} header fields" in op["responses"]["431"]["description"]
            assert f"{MAX_HEADER_FIELD_BYTES} bytes" in op["responses"]["431"]["description"]
            for status, response in op["responses"].items():
                if int(status) >= 400 and path != "/readyz":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, (path, method, status)


def test_with_the_envelope_on_real_answers_conform_to_the_enveloped_document(api_settings, api_broker,
                                                                            trace_workers, user, trace_cids):
    settings = api_settings.replace(api_envelope=1)
    spec = document(settings)
    client = make_client(settings, api_broker, user)
    validate(spec)

    accepted = client.simulate_post("/api/trace/events", json=body(trace_cids[:300], ["history"])).json
    job = accepted["data"]["job_id"]
    wait_for(lambda: client.simulate_get(f"/api/trace/job/{job}").json["data"]["status"] == "completed", 30,
             interval_s=0.05, message="the job")
    answers = {
        "/api/trace/events": accepted,
        "/api/trace/job/{job_id}": client.simulate_get(f"/api/trace/job/{job}").json,
        "/api/trace/job/{job_id}/result": json.loads(client.simulate_get(f"/api/trace/job/{job}/result").text),
        "/api/v1/jobs": client.simulate_get("/api/v1/jobs").json,
    }
    for path, answer in answers.items():
        op = spec["paths"][path]["post" if path == "/api/trace/events" else "get"]
        schema = op["responses"]["202" if path == "/api/trace/events" else "200"]["content"]["application/json"]
        root = {**schema["schema"], "components": spec["components"]}
        jsonschema.Draft202012Validator(root).validate(answer)
        assert answer["success"] is True, path
    error = client.simulate_get("/api/trace/job/trace-evt-0")
    conforms(spec, "Error", error.json)
    assert error.json["success"] is False and error.json["error"]["code"] == "JOB_NOT_FOUND"
