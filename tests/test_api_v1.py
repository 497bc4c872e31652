"""/api/v1/jobs: the caller's jobs listed and in detail, cancel and retry."""

from __future__ import annotations

import pytest

from tests.conftest_proc import run_until
from tracebus.engine.actor import set_broker
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.worker import Worker
from tracebus.trace import tasks

from tests.api_support import (api_broker, api_settings, client, idle_client, make_client,  # noqa: F401
                               submit, trace_cids, trace_workers, user, wait_job)


def test_the_list_holds_only_the_callers_jobs_newest_first_and_filters_by_status(idle_client, trace_cids,
                                                                                  user):
    jobs = [submit(idle_client, trace_cids[i:i + 300]) for i in (0, 300, 600)]
    idle_client.simulate_post(f"/api/v1/jobs/{jobs[0]}/cancel")
    submit(idle_client, trace_cids[900:1200], **{"X-User-Id": user + "-other"})

    listing = idle_client.simulate_get("/api/v1/jobs").json
    queued = idle_client.simulate_get("/api/v1/jobs", params={"status": "queued"}).json
    cancelled = idle_client.simulate_get("/api/v1/jobs", params={"status": "cancelled"}).json
    page = idle_client.simulate_get("/api/v1/jobs", params={"offset": 1, "limit": 1}).json

    assert [j["job_id"] for j in listing["jobs"]] == jobs[::-1]
    assert listing["total"] == 3 and listing["next_offset"] is None
    assert {j["user"] for j in listing["jobs"]} == {user}
    assert [j["job_id"] for j in queued["jobs"]] == jobs[:0:-1]
    assert [j["job_id"] for j in cancelled["jobs"]] == [jobs[0]]
    assert [j["job_id"] for j in page["jobs"]] == [jobs[1]] and page["next_offset"] == 2


@pytest.mark.parametrize("params, says", [
    ({"status": "sleeping"}, "status must be one of"),
    ({"offset": "-3"}, "offset"),
    ({"limit": "0"}, "limit"),
    ({"limit": "5000"}, "limit"),
])
def test_bad_list_parameters_are_400(idle_client, params, says):
    resp = idle_client.simulate_get("/api/v1/jobs", params=params)

    assert resp.status_code == 400 and resp.json["error"]["code"] == "INVALID_PARAMS"
    assert says in resp.json["error"]["message"]


def test_the_detail_shows_each_domain_and_each_unit(client, trace_cids):
    job = submit(client, trace_cids[:250], ["history", "holds"])
    wait_job(client, job)

    doc = client.simulate_get(f"/api/v1/jobs/{job}").json

    assert doc["job_id"] == job and doc["status"] == "completed" and doc["params"] == {}
    assert [(d["domain"], d["state"], d["units_total"]) for d in doc["domain_states"]] == \
        [("history", "done", 3), ("holds", "done", 3)]
    assert [(u["unit"], u["domain"], u["chunk"], u["state"]) for u in doc["units"]] == \
        [(i, "history" if i < 3 else "holds", i % 3, "done") for i in range(6)]
    assert sum(u["rows"] for u in doc["units"]) == doc["progress"]["rows"]
    assert all(u["attempt"] == 1 and u["started_at"] <= u["finished_at"] for u in doc["units"])


def test_cancel_stops_a_queued_job_once(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])

    first = idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel")
    again = idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel")

    assert first.status_code == 200 and first.json["status"] == "cancelled"
    assert again.status_code == 409 and again.json["error"]["code"] == "JOB_STATE_CONFLICT"
    assert "cancel" in again.json["error"]["message"]


def test_retry_reruns_what_was_cancelled_until_the_job_completes(api_settings, api_broker, user, trace_cids):
    idle = make_client(api_settings, api_broker, user, queue="idle-queue")
    job = submit(idle, trace_cids[:300], ["history", "materials"])
    assert idle.simulate_post(f"/api/v1/jobs/{job}/cancel").status_code == 200

    retried = idle.simulate_post(f"/api/v1/jobs/{job}/retry")

    assert retried.status_code == 202, retried.text
    assert retried.json["status"] in ("queued", "running")
    # A worker in this process reads the job's queue (its units go where it was submitted to).
    set_broker(api_broker)
    try:
        tasks.open_runtime()
        worker = Worker(api_broker, ["idle-queue"], WorkerSlot())
        worker.boot()
        run_until(worker, lambda: idle.simulate_get(f"/api/trace/job/{job}").json["status"] == "completed",
                  timeout_s=30, message="the retried job to complete")
    finally:
        set_broker(None)
    rows = idle.simulate_get(f"/api/trace/job/{job}/result", params={"domain": "materials"}).json
    assert rows["complete"] is True


def test_retry_is_refused_while_queued_and_once_completed(client, idle_client, trace_cids):
    queued = submit(idle_client, trace_cids[:300])
    done = submit(client, trace_cids[300:600])
    wait_job(client, done)

    for c, job in ((idle_client, queued), (client, done)):
        resp = c.simulate_post(f"/api/v1/jobs/{job}/retry")
        assert resp.status_code == 409, resp.text
        assert resp.json["error"]["code"] == "JOB_STATE_CONFLICT"
    assert client.simulate_post(f"/api/v1/jobs/{done}/cancel").status_code == 409


def test_another_users_job_is_404_for_every_v1_action(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])
    mallory = {"X-User-Id": "mallory"}

    for method, path in (("GET", f"/api/v1/jobs/{job}"), ("POST", f"/api/v1/jobs/{job}/cancel"),
                         ("POST", f"/api/v1/jobs/{job}/retry"), ("GET", "/api/v1/jobs/trace-evt-0")):
        resp = idle_client.simulate_request(method, path, headers=mallory)
        assert resp.status_code == 404 and resp.json["error"]["code"] == "JOB_NOT_FOUND", (method, path)
    assert idle_client.simulate_get("/api/v1/jobs", headers=mallory).json["total"] == 0
    assert idle_client.simulate_get(f"/api/trace/job/{job}").json["status"] == "queued"  # untouched
