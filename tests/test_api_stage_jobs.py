"""Large seed-resolve and lineage requests run as jobs (issue 10: "the same 202 / poll / stream
contract as events").

Real redis-server, real ``tracebus worker tracebus.trace.tasks`` processes (which import the
stage actor), the Falcon TestClient; the thresholds are lowered in the settings
(:data:`ASYNC`: date ranges over 10 days, lineages over 20 seeds) rather than the data made
huge. The dashboard's client is followed as written (useTraceProgress.ts: ``async === true``
and ``status_url`` → useAsyncJobPolling.ts's poll → GET ``status_url + "/result"``), and each
job's answer is compared with the synchronous answer to the same request (:data:`SYNC`). One
test goes through a real gunicorn.
"""

from __future__ import annotations

import time

import pytest
import redis

from api.openapi import document
from tests.api_support import api_broker, api_settings, make_client, trace_workers, user  # noqa: F401
from tests.conftest_trace import assert_every_key_expires
from tests.test_api_msd_stages import MSD, SYNC, seed_body, seeds_by_sql, START, END
from tests.test_api_openapi import conforms
from tests.test_e2e_contracts import JobFailed, poll_job_until_complete, request
from tests.test_e2e_http import System
from tracebus.engine.keys import Keys
from tracebus.jobs.dispatch import Dispatcher
from tracebus.trace.lineage_cache import LineageCache
from tracebus.trace.service import TraceService
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.stages import units as stage_tasks
from tracebus.trace.stages.jobs import StageJobs
from tracebus.trace.stages.params import SeedRequest

#: Date ranges over 10 days and lineages over 20 seeds are jobs.
ASYNC = {"seed_async_days": 10, "async_cid_threshold": 20}


@pytest.fixture
def jobs_client(api_settings, api_broker, trace_workers, user):
    return make_client(api_settings, api_broker, user, **ASYNC)


@pytest.fixture
def sync_client(api_settings, api_broker, user):
    return make_client(api_settings, api_broker, user, **SYNC)


@pytest.fixture
def idle_jobs_client(api_settings, api_broker, user):
    """Stage jobs sent to a queue no worker reads: they stay queued."""
    return make_client(api_settings, api_broker, user, queue="idle-stages", **ASYNC)


def unwrap(payload):
    """useTraceProgress.ts::unwrapEnvelope."""
    if isinstance(payload, dict) and payload.get("success") is True and "data" in payload:
        return payload["data"]
    return payload


def run_stage(client, path: str, body: dict) -> tuple[int, dict]:
    """One stage as useTraceProgress.ts runs it: POST; when the answer has ``async === true`` and a
    ``status_url``, poll it (useAsyncJobPolling.ts) and GET ``status_url + "/result"``."""
    resp = client.simulate_post(path, json=body)
    assert resp.status_code in (200, 202), resp.text
    envelope = unwrap(resp.json)
    if envelope.get("async") is True and envelope.get("status_url"):
        poll_job_until_complete(client.simulate_get, envelope["status_url"], interval_s=0.05, max_s=60)
        result = client.simulate_get(f"{envelope['status_url']}/result")
        assert result.status_code == 200, result.text
        return resp.status_code, unwrap(result.json)
    return resp.status_code, envelope


def lineage_body(seeds, profile=MSD, direction="backward") -> dict:
    return {"profile": profile, "container_ids": list(seeds), "params": {"direction": direction}}


def forget_lineage(api_broker, api_settings, query_id: str) -> None:
    api_broker.client.delete(f"{api_settings.key_prefix}:trace:lineage:{query_id}")


def test_a_long_date_range_is_a_job_whose_answer_is_the_synchronous_one(jobs_client, sync_client):
    resp = jobs_client.simulate_post("/api/trace/seed-resolve", json=seed_body())

    accepted = resp.json
    job_id = accepted["job_id"]
    assert resp.status_code == 202 and accepted["async"] is True and accepted["stage"] == "seed-resolve"
    assert job_id.startswith("trace-seed-") and accepted["status_url"] == f"/api/trace/seed/job/{job_id}"
    assert resp.headers["location"] == accepted["status_url"]
    assert accepted["result_url"] == accepted["status_url"] + "/result"
    status, _ = poll_job_until_complete(jobs_client.simulate_get, accepted["status_url"], interval_s=0.05)
    answer = jobs_client.simulate_get(accepted["result_url"])
    expected = sync_client.simulate_post("/api/trace/seed-resolve", json=seed_body())
    assert expected.status_code == 200 and answer.status_code == 200
    assert answer.json == expected.json and answer.json["seed_count"] > 50
    assert accepted["query_id"] == expected.json["query_id"] and accepted["cache_key"] == expected.json["cache_key"]
    assert (status["status"], status["progress"], status["stage"]) == ("completed", "complete", "seed-resolve")
    assert status["query_id"] == expected.json["query_id"]


def test_short_ranges_and_container_mode_stay_synchronous(jobs_client, sample_db):
    short = jobs_client.simulate_post("/api/trace/seed-resolve",
                                      json=seed_body(start_date="2025-01-01", end_date="2025-01-11"))
    container = jobs_client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "lot_id", "values": ["NO-SUCH-LOT"]}})

    assert short.status_code == 200 and "async" not in short.json
    assert set(short.json["seed_container_ids"]) == seeds_by_sql(sample_db, "2025-01-01", "2025-01-11")
    assert container.status_code == 404  # checked and run in the request, as before


def test_a_large_lineage_is_a_job_whose_answer_is_the_synchronous_one_and_is_cached(
        jobs_client, sync_client, api_settings, api_broker, sample_db):
    seeds = sync_client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json["seed_container_ids"]
    query_id = sync_client.simulate_post("/api/trace/lineage", json=lineage_body(seeds[:3])).json["query_id"]
    forget_lineage(api_broker, api_settings, query_id)

    resp = jobs_client.simulate_post("/api/trace/lineage", json=lineage_body(seeds))
    accepted = resp.json
    status, _ = poll_job_until_complete(jobs_client.simulate_get, accepted["status_url"], interval_s=0.05)
    answer = jobs_client.simulate_get(accepted["result_url"]).json
    cache = LineageCache(api_broker.client, api_settings.key_prefix, api_settings.job_ttl_s)
    stored = cache.get(accepted["query_id"])
    forget_lineage(api_broker, api_settings, accepted["query_id"])  # the synchronous answer recomputes
    expected = sync_client.simulate_post("/api/trace/lineage", json=lineage_body(seeds)).json
    source = SqliteSource(sample_db)
    try:
        direct = LineageReads(source).lineage_backward(seeds).to_dict()
    finally:
        source.close()

    assert resp.status_code == 202 and accepted["async"] is True and accepted["stage"] == "lineage"
    assert accepted["job_id"].startswith("trace-lin-") and accepted["cid_count"] == len(seeds)
    assert accepted["status_url"] == f"/api/trace/lineage/job/{accepted['job_id']}"
    assert accepted["query_id"] == expected["query_id"] == status["query_id"] and query_id != expected["query_id"]
    assert answer == expected and answer["total_ancestor_count"] > 0
    assert stored["seeds"] == seeds and stored["direction"] == "backward"
    assert stored["ancestors"] == direct["ancestors"] and stored["seed_roots"] == direct["seed_roots"]


def test_a_whole_forward_lineage_job_equals_the_synchronous_one(jobs_client, sync_client, api_settings,
                                                                 api_broker):
    seeds = sync_client.simulate_post("/api/trace/seed-resolve",
                                      json=seed_body(station="焊接_DB")).json["seed_container_ids"][:40]
    body = lineage_body(seeds, profile="query_tool", direction="forward")

    status_code, answer = run_stage(jobs_client, "/api/trace/lineage", body)
    forget_lineage(api_broker, api_settings, answer["query_id"])
    expected = sync_client.simulate_post("/api/trace/lineage", json=body).json

    assert status_code == 202 and answer == expected and answer["children_map"]


def test_the_dashboard_client_runs_both_stages_through_jobs_with_the_envelope_on(api_settings, api_broker,
                                                                                  trace_workers, user):
    client = make_client(api_settings, api_broker, user, api_envelope=1, **ASYNC)
    spec = document(api_settings.replace(**ASYNC))  # the schemas; the envelope is checked here

    raw = client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json
    seed_code, seed = run_stage(client, "/api/trace/seed-resolve", seed_body())
    lineage_code, lineage = run_stage(client, "/api/trace/lineage", lineage_body(seed["seed_container_ids"]))
    status = client.simulate_get(raw["data"]["status_url"]).json

    assert raw["success"] is True and raw["data"]["async"] is True
    assert (seed_code, lineage_code) == (202, 202)
    assert seed["stage"] == "seed-resolve" and lineage["stage"] == "lineage" and lineage["query_id"].startswith("lin-")
    assert status["success"] is True and status["data"]["status"] == "completed"
    conforms(spec, "StageAccepted", raw["data"])
    conforms(spec, "StageStatus", status["data"])
    conforms(spec, "SeedResult", seed)
    conforms(spec, "LineageResult", lineage)


@pytest.mark.parametrize("path, body, words", [
    ("/api/trace/seed-resolve", seed_body(start_date="2023-01-01", end_date="2025-12-31"), "at most 730"),
    ("/api/trace/seed-resolve", seed_body(station="NOWHERE"), "unknown station"),
    ("/api/trace/lineage", lineage_body([f"C{i}" for i in range(30)], direction="up"), "direction must be one of"),
    ("/api/trace/lineage", lineage_body([f"C{i}" for i in range(29)] + ["x" * 65]), "longer than 64"),
])
def test_bad_input_is_a_400_before_any_job(jobs_client, path, body, words):
    resp = jobs_client.simulate_post(path, json=body)

    assert resp.status_code == 400 and words in resp.json["error"]["message"], resp.text
    assert jobs_client.simulate_get("/api/v1/jobs").json["total"] == 0


def test_status_and_result_of_a_job_that_has_not_run(idle_jobs_client, api_settings, api_broker):
    accepted = idle_jobs_client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json
    again = idle_jobs_client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json
    job_id = accepted["job_id"]

    status = idle_jobs_client.simulate_get(accepted["status_url"]).json
    early = idle_jobs_client.simulate_get(accepted["result_url"])
    wrong_kind = idle_jobs_client.simulate_get(f"/api/trace/lineage/job/{job_id}")
    unknown = idle_jobs_client.simulate_get("/api/trace/seed/job/trace-seed-0123456789abcdef01234567")
    stranger = make_client(api_settings, api_broker, "someone-else").simulate_get(accepted["status_url"])
    # as a worker takes it: running, and both progress fields say what it does
    from tracebus.jobs.store import JobStore
    assert JobStore(api_broker.client, api_settings).begin_unit(job_id, 0) is not None
    running = idle_jobs_client.simulate_get(accepted["status_url"]).json
    assert (running["status"], running["progress"], running["progress_detail"]["stage"]) == \
        ("running", "resolving seeds", "resolving seeds")
    idle_jobs_client.simulate_post(f"/api/v1/jobs/{job_id}/cancel")

    assert again["job_id"] == job_id  # single-flight: the same request while it is in flight
    assert (status["status"], status["progress"]) == ("queued", "")
    assert early.status_code == 409 and early.json["error"]["code"] == "JOB_NOT_COMPLETE"
    assert early.json["status"] == "queued"
    assert [r.status_code for r in (wrong_kind, unknown, stranger)] == [404, 404, 404]
    with pytest.raises(JobFailed) as failed:  # what the dashboard's poller throws
        poll_job_until_complete(idle_jobs_client.simulate_get, accepted["status_url"])
    assert failed.value.status["code"] == "JOB_CANCELLED" and failed.value.status["state"] == "cancelled"
    assert idle_jobs_client.simulate_get(accepted["result_url"]).status_code == 409
    api_broker.client.delete(Keys(api_settings.key_prefix).stream("idle-stages"))  # a queue: no TTL


def test_every_key_of_the_stage_jobs_expires(jobs_client, api_settings, api_broker):
    _, seed = run_stage(jobs_client, "/api/trace/seed-resolve", seed_body(end_date="2025-02-15"))
    seeds = seed["seed_container_ids"]
    jobs = [jobs_client.simulate_post("/api/trace/seed-resolve", json=seed_body(end_date="2025-02-15")),
            jobs_client.simulate_post("/api/trace/lineage", json=lineage_body(seeds, direction="forward"))]
    for resp in jobs:
        poll_job_until_complete(jobs_client.simulate_get, resp.json["status_url"], interval_s=0.05)

    listed = jobs_client.simulate_get("/api/v1/jobs").json["jobs"]
    assert {j["job_id"] for j in listed} >= {r.json["job_id"] for r in jobs}
    assert_every_key_expires(api_broker.client, TraceService(api_settings, api_broker),
                             [j["job_id"] for j in listed])
    ttl = api_broker.client.ttl(f"{api_settings.key_prefix}:trace:lineage:{jobs[1].json['query_id']}")
    assert 0 < ttl <= api_settings.job_ttl_s


def test_through_gunicorn_the_stages_are_jobs_and_the_lineage_is_left_for_the_events_stage(sample_db, tmp_path):
    system = System(tmp_path, sample_db, TRACEBUS_TRUSTED_PROXIES="127.0.0.1", TRACE_ASYNC_CID_THRESHOLD="50")
    get = lambda path: request(system.port, "GET", path)  # noqa: E731
    try:
        system.wait_ready()
        seed = request(system.port, "POST", "/api/trace/seed-resolve", seed_body())
        poll_job_until_complete(get, seed.json["status_url"], interval_s=0.1)
        seeds = get(seed.json["status_url"] + "/result").json["seed_container_ids"]
        lineage = request(system.port, "POST", "/api/trace/lineage",
                          {"profile": MSD, "container_ids": seeds, "cache_key": seed.json["cache_key"],
                           "params": seed_body()["params"]})
        poll_job_until_complete(get, lineage.json["status_url"], interval_s=0.1)
        answer = get(lineage.json["status_url"] + "/result").json

        client = redis.Redis.from_url(system.env["REDIS_URL"])
        stored = LineageCache(client, system.env["TRACEBUS_KEY_PREFIX"], 3600).get(lineage.json["query_id"])
        assert (seed.status, lineage.status) == (202, 202) and len(seeds) == len(seeds_by_sql(sample_db, START, END))
        assert stored is not None and stored["seeds"] == seeds and len(stored["ancestors"]) == len(seeds)
        assert stored["total_ancestor_count"] == answer["total_ancestor_count"] > 0
        assert answer["query_id"] == lineage.json["query_id"]
    finally:
        system.stop()


def test_a_stage_heartbeats_while_it_runs_and_stops_after(monkeypatch):
    beats = []
    monkeypatch.setattr(stage_tasks, "heartbeat", lambda: beats.append(time.monotonic()))

    with stage_tasks.beating(every_s=0.01):
        time.sleep(0.2)
    during = len(beats)
    time.sleep(0.05)

    assert during >= 5 and len(beats) == during


def test_a_stage_job_that_fails_in_the_worker_is_failed_at_once_with_its_error(jobs_client, api_settings,
                                                                                api_broker, user):
    jobs = StageJobs(api_settings, api_broker.client)
    forged = SeedRequest({**seed_body()["params"], "station": "NOWHERE"}, "date_range", "NOWHERE",
                         dates=(START, END), profile="mid_section_defect")  # never admitted by the API: its check is a 400
    accepted = jobs.submit_seed(forged, user, Dispatcher(api_broker, jobs.store))

    with pytest.raises(JobFailed) as failed:
        poll_job_until_complete(jobs_client.simulate_get, accepted["status_url"], interval_s=0.05, max_s=10)

    assert failed.value.status["state"] in ("failed", "partial") and "unknown station" in str(failed.value)
    assert jobs_client.simulate_get(accepted["result_url"]).status_code == 409
