"""The dashboard's generic job contract for every kind (issue 28, item 1): ``/api/job/{id}``.

Real redis-server, real ``tracebus worker tracebus.trace.tasks`` processes, the Falcon
TestClient; the dashboard's poller is followed as written (useAsyncJobPolling.ts:
unwrap ``data``, stop on completed, throw on failed). A trace job, an MSD job, a lineage stage
job and a job of a kind the API knows nothing of (the CSV-export example, run by a worker of
this process) are polled to completion and their results read; abandon cancels for real.
"""

from __future__ import annotations

import sqlite3

import pytest

from api.openapi import document
from examples.csv_export import app as csv_export
from tests.api_support import (QUERY_TOOL, api_broker, api_settings, body, client, idle_client,  # noqa: F401
                               make_client, trace_cids, trace_workers, user)
from tests.conftest_proc import run_until
from tests.test_api_openapi import conforms
from tests.test_api_stage_jobs import lineage_body
from tests.test_api_msd_stages import seed_body
from tests.test_e2e_contracts import JobFailed, poll_job_until_complete
from tests.test_msd_e2e_http import WINDOW, _seeds
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.worker import Worker
from tracebus.jobs.store import JobStore

FIELDS = {"job_id", "status", "progress", "pct", "stage", "completed_stages", "query_id", "dataset_id",
          "elapsed_seconds", "created_at", "error"}


@pytest.fixture(scope="module")
def spec(api_settings):
    return document(api_settings)


def enveloped(resp) -> dict:
    """The original's envelope, always (whatever TRACEBUS_API_ENVELOPE says): its ``data``."""
    payload = resp.json
    assert payload["success"] is (resp.status_code < 400) and "meta" in payload, payload
    return payload["data"] if resp.status_code < 400 else payload["error"]


def poll(client, job_id: str, prefix: str | None = None, spec=None) -> tuple[dict, list[dict]]:
    """Poll ``/api/job/{id}[?prefix=]`` as useAsyncJobPolling.ts does; every answer checked
    against the OpenAPI document. Returns (final status, every status seen)."""
    seen = []

    def get(url):
        resp = client.simulate_get(url)
        assert resp.status_code == 200, resp.text
        if spec is not None:
            conforms(spec, "GenericStatus", resp.json)
        seen.append(resp.json["data"])
        return resp
    url = f"/api/job/{job_id}" + (f"?prefix={prefix}" if prefix else "")
    status, _ = poll_job_until_complete(get, url, interval_s=0.05)
    return status, seen


def test_a_trace_job_is_polled_to_completion_and_its_result_is_the_trace_result(client, trace_cids, spec):
    resp = client.simulate_post("/api/trace/events", json=body(trace_cids[:600], ("history", "materials")))
    job_id = resp.json["job_id"]

    status, seen = poll(client, job_id, prefix="trace-evt", spec=spec)

    assert FIELDS <= set(status) and status["status"] == "completed" and status["pct"] == 100
    assert status["query_id"] == job_id and status["progress"] == "complete" and status["error"] is None
    assert status["completed_stages"] == ["history", "materials"] and status["kind"] == "trace-evt"
    assert all(s["status"] in ("queued", "running", "completed") and isinstance(s["progress"], str)
               and 0 <= s["pct"] <= 100 for s in seen)
    assert [s["pct"] for s in seen] == sorted(s["pct"] for s in seen)
    # The result is the trace's own full result, in the envelope.
    result = client.simulate_get(f"/api/job/{job_id}/result", params={"prefix": "trace-evt"})
    assert result.status_code == 200 and result.headers["content-type"].startswith("application/json")
    expected = client.simulate_get(f"/api/trace/job/{job_id}/result").json
    assert enveloped(result)["results"] == expected["results"] and expected["results"]["history"]["count"] > 0
    conforms(spec, "GenericResult", result.json)
    # No prefix is the same job; another kind's prefix is 404, as in the original.
    assert enveloped(client.simulate_get(f"/api/job/{job_id}"))["job_id"] == job_id
    for path in ("", "/result"):
        other = client.simulate_get(f"/api/job/{job_id}{path}", params={"prefix": "query-tool"})
        assert other.status_code == 404 and enveloped(other)["code"] == "JOB_NOT_FOUND"
        partial = client.simulate_get(f"/api/job/{job_id}{path}", params={"prefix": "trace"})
        assert partial.status_code == 404


def test_an_msd_job_is_polled_to_completion_with_its_trace_query_id(client, sample_db, spec):
    seeds = _seeds(sample_db)
    req = {"profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
           "domains": ["upstream_history", "materials"],
           "params": {"station": "測試", "direction": "backward", "start_date": WINDOW[0], "end_date": WINDOW[1]}}
    resp = client.simulate_post("/api/trace/events", json=req)
    assert resp.status_code == 202, resp.text

    status, _ = poll(client, resp.json["job_id"], spec=spec)

    trace_status = client.simulate_get(f"/api/trace/job/{status['job_id']}").json
    assert status["dataset_id"] == trace_status["trace_query_id"] and status["dataset_id"].startswith("msd-")
    result = enveloped(client.simulate_get(f"/api/job/{status['job_id']}/result"))
    assert result["trace_query_id"] == status["dataset_id"] and result["aggregation"]["kpi"]["lot_count"] > 0


def test_a_lineage_stage_job_is_polled_and_its_result_is_the_stage_answer(api_settings, api_broker,
                                                                          trace_workers, user, spec):
    sync = make_client(api_settings, api_broker, user, seed_async_days=180, async_cid_threshold=200_000)
    jobs = make_client(api_settings, api_broker, user, seed_async_days=10, async_cid_threshold=20)
    seeds = sync.simulate_post("/api/trace/seed-resolve", json=seed_body()).json["seed_container_ids"]
    accepted = jobs.simulate_post("/api/trace/lineage", json=lineage_body(seeds, direction="forward")).json

    status, seen = poll(jobs, accepted["job_id"], prefix="trace-lin", spec=spec)

    assert all(s["query_id"] == accepted["query_id"] for s in seen)
    answer = enveloped(jobs.simulate_get(f"/api/job/{accepted['job_id']}/result"))
    assert answer == jobs.simulate_get(f"{accepted['status_url']}/result").json
    assert answer == sync.simulate_post("/api/trace/lineage", json=lineage_body(seeds, direction="forward")).json


def test_a_kind_the_api_knows_nothing_of_is_served_by_the_defaults(api_settings, api_broker, user, tmp_path, spec):
    path = tmp_path / "export.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE lots (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        db.executemany("INSERT INTO lots VALUES (?, ?, ?)", [(i, f"lot-{i:04d}", i % 7) for i in range(1234)])
    store = JobStore(api_broker.client, api_settings)
    job_id = csv_export.submit(api_broker, store, str(path), "SELECT id, name, qty FROM lots ORDER BY id", user,
                               page_rows=500)
    api = make_client(api_settings, api_broker, user)
    queued = enveloped(api.simulate_get(f"/api/job/{job_id}", params={"prefix": "csv-export"}))
    assert (queued["status"], queued["progress"], queued["pct"], queued["query_id"]) == ("queued", "", 0, None)

    worker = Worker(api_broker, [csv_export.QUEUE], WorkerSlot())
    worker.boot()
    run_until(worker, lambda: store.status(job_id)["status"] == "completed", message="export done")

    status, _ = poll(api, job_id, prefix="csv-export", spec=spec)
    assert (status["progress"], status["completed_stages"], status["query_id"]) == ("complete", ["rows"], job_id)
    result = enveloped(api.simulate_get(f"/api/job/{job_id}/result"))
    rows = result["results"]["rows"]
    assert rows["columns"] == ["id", "name", "qty"] and rows["count"] == 1234
    assert rows["data"][:2] == [{"id": 0, "name": "lot-0000", "qty": 0}, {"id": 1, "name": "lot-0001", "qty": 1}]
    assert [r["id"] for r in rows["data"]] == list(range(1234))


def test_abandon_cancels_the_job_and_the_poller_stops_with_job_cancelled(api_settings, api_broker, user,
                                                                         trace_cids, spec):
    idle = make_client(api_settings, api_broker, user, queue="idle-queue", rate_limits="job-abandon=3/60")
    job_id = idle.simulate_post("/api/trace/events", json=body(trace_cids[:600])).json["job_id"]
    running = enveloped(idle.simulate_get(f"/api/job/{job_id}"))
    assert running["status"] == "queued"

    first = idle.simulate_post(f"/api/job/{job_id}/abandon", json={})

    assert first.status_code == 200 and enveloped(first) == {"job_id": job_id, "status": "abandoned",
                                                             "already_abandoned": False}
    conforms(spec, "Abandoned", first.json)
    with pytest.raises(JobFailed) as failed:
        poll(idle, job_id, spec=spec)
    assert failed.value.status["code"] == "JOB_CANCELLED" and failed.value.status["error"]
    assert idle.simulate_get(f"/api/v1/jobs/{job_id}").json["state"] == "cancelled"  # really cancelled
    again = idle.simulate_post(f"/api/job/{job_id}/abandon", json={"prefix": "trace-evt"})
    assert enveloped(again)["already_abandoned"] is True
    gone = idle.simulate_get(f"/api/job/{job_id}/result")
    assert gone.status_code == 409
    # The rate limit is the original's job-abandon bucket (here 3 per minute).
    limited = idle.simulate_post(f"/api/job/{job_id}/abandon", body="")
    assert limited.status_code == 200
    over = idle.simulate_post(f"/api/job/{job_id}/abandon", json={})
    assert over.status_code == 429 and "Retry-After" in over.headers


def test_abandon_of_a_finished_job_is_409_and_bad_bodies_are_400(client, trace_cids):
    job_id = client.simulate_post("/api/trace/events", json=body(trace_cids[:300])).json["job_id"]
    poll(client, job_id)

    done = client.simulate_post(f"/api/job/{job_id}/abandon", json={"prefix": "trace-evt"})

    assert done.status_code == 409 and enveloped(done)["code"] == "JOB_ALREADY_TERMINAL"
    for bad in ([], {"prefix": 3}, {"prefix": "x" * 65}):
        resp = client.simulate_post(f"/api/job/{job_id}/abandon", json=bad)
        assert resp.status_code == 400, (bad, resp.text)
    other = client.simulate_post(f"/api/job/{job_id}/abandon", json={"prefix": "hold-history"})
    assert other.status_code == 404


def test_a_named_users_job_is_theirs_alone(api_settings, api_broker, trace_workers, trace_cids, user):
    alice = make_client(api_settings, api_broker, user + "-alice", queue="idle-queue")
    bob = make_client(api_settings, api_broker, user + "-bob", queue="idle-queue")
    job_id = alice.simulate_post("/api/trace/events", json=body(trace_cids[:300])).json["job_id"]

    for resp in (bob.simulate_get(f"/api/job/{job_id}"), bob.simulate_get(f"/api/job/{job_id}/result"),
                 bob.simulate_post(f"/api/job/{job_id}/abandon", json={})):
        assert resp.status_code == 404 and enveloped(resp)["code"] == "JOB_NOT_FOUND"
    assert enveloped(alice.simulate_get(f"/api/job/{job_id}"))["status"] == "queued"  # bob's abandon did nothing
    for bad in ("nope", f"{job_id}:units"):
        assert alice.simulate_get(f"/api/job/{bad}").status_code == 404
    assert alice.simulate_get(f"/api/job/{job_id}", params={"prefix": "x" * 65}).status_code == 400
    alice.simulate_post(f"/api/job/{job_id}/abandon", json={})
