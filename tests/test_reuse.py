"""Results reused across requests over HTTP (issue 38): the source reads nothing, counted.

Real redis-server, real workers whose source counts every statement it runs into a file
(``tests.counting_tasks``), the API's own source counting into the same file (MSD's lineage
and the synchronous answers), two users in token mode. An identical trace, MSD and
equipment-period request of another user is answered from the first's stored result with
no statement, as a job of its own that names the result and never the first user's job;
``Cache-Control: no-cache`` (and ``fresh`` in ``/api/v1/jobs``) runs it again; ``/metrics``
counts the outcomes. The dashboard's MSD page reopened by another user (seed-resolve and
lineage as jobs, then the events stage, as useTraceProgress.ts calls them) reads nothing.
The job layer's paths (ages, TTLs, partial results) are in test_reuse_store.py.
"""

from __future__ import annotations

import os

import pytest
from falcon import testing

from api.app import create_app
from tests.api_support import (  # noqa: F401  (api_broker, api_settings: fixtures)
    api_broker, api_settings, page_all, parse_sse, registered_workers, wait_job)
from tests.helpers import run_trace_unit_here
from tests.statement_count import STATEMENT_LOG, CountingSqlite, count, factory
from tests.test_api_msd_stages import seed_body
from tests.test_api_stage_jobs import lineage_body, run_stage
from tests.test_e2e_contracts import poll_job_until_complete
from tests.test_query_jobs import PATH as EQUIPMENT_PATH, body as equipment_body, equipment  # noqa: F401
from tracebus.trace.service import TraceService

TOKENS = "t-alice:alice,t-bob:bob,t-carol:carol"
#: The MSD page's stages as jobs: date ranges over 10 days and lineages over 20 seeds.
ASYNC_STAGES = {"seed_async_days": 10, "async_cid_threshold": 20}
#: This module's own trace queue, so that only its own jobs' statements are counted: a user's jobs
#: share their places on a queue (TRACE_USER_MAX_INFLIGHT_UNITS), and a job of "alice" that an
#: earlier test file of the same xdist worker left held on the shared queue may be handed a place
#: when one of this module's units settles (the likely cause of one CI-like run's 8 == 6).
QUEUE = "reuse-trace"


@pytest.fixture(scope="module")
def statements(tmp_path_factory):
    return tmp_path_factory.mktemp("statements") / "statements.log"


@pytest.fixture(scope="module")
def counting_workers(api_settings, api_broker, tmp_path_factory, statements):
    """Two workers of ``tests.counting_tasks`` (the file named through their environment)."""
    os.environ[STATEMENT_LOG] = str(statements)
    try:
        yield from registered_workers(api_settings.replace(queue=QUEUE), api_broker, tmp_path_factory,
                                      modules=("tests.counting_tasks",))
    finally:
        os.environ.pop(STATEMENT_LOG, None)


def app(api_settings, api_broker, statements, token: str, **overrides) -> testing.TestClient:
    # Reuse on, as by default (the API tests' environment turns it off: tests.helpers.NO_REUSE).
    settings = api_settings.replace(api_tokens=TOKENS, result_reuse_max_age_s=-1, **{"queue": QUEUE, **overrides})
    service = TraceService(settings, api_broker, source_factory=factory(statements))
    return testing.TestClient(create_app(settings, api_broker, service=service),
                              headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def clients(api_settings, api_broker, statements, counting_workers):
    return {u: app(api_settings, api_broker, statements, f"t-{u}") for u in ("alice", "bob", "carol")}


def trace_body(cids) -> dict:
    return {"profile": "query_tool", "container_ids": list(cids), "domains": ["history", "materials"]}


def test_an_identical_trace_of_another_user_reads_nothing_and_no_cache_runs_it_again(
        clients, statements, sample_db):
    from tracebus.trace.synth import cids as all_cids

    alice, bob = clients["alice"], clients["bob"]
    request = trace_body(all_cids(sample_db)[:300])  # 3 units a domain: a job
    first = alice.simulate_post("/api/trace/events", json=request)
    assert first.status_code == 202, first.text
    done = wait_job(alice, first.json["job_id"])
    before = count(statements)
    assert done["status"] == "completed" and done["reused_from"] is None and before >= 6

    second = bob.simulate_post("/api/trace/events", json=request)
    status = bob.simulate_get(f"/api/trace/job/{second.json['job_id']}")

    assert count(statements) == before  # no statement: the source read nothing
    job_a, job_b = first.json["job_id"], second.json["job_id"]
    assert second.status_code == 202 and job_b != job_a and job_a not in second.text + status.text
    doc = status.json
    assert doc["status"] == "completed" and doc["user"] == "bob" and doc["reused_from"].startswith("res-")
    assert doc["result_age_s"] >= 0 and doc["fresh"] is False
    for domain in ("history", "materials"):
        assert page_all(bob, job_b, domain, 250) == page_all(alice, job_a, domain, 250)
    assert bob.simulate_get(f"/api/trace/job/{job_a}").status_code == 404
    assert alice.simulate_get(f"/api/trace/job/{job_b}").status_code == 404
    generic = bob.simulate_get(f"/api/job/{job_b}").json["data"]
    assert generic["reused_from"] == doc["reused_from"] and job_a not in str(generic)
    assert bob.simulate_get(f"/api/trace/job/{job_b}/stream").status_code == 200
    events = parse_sse(bob.simulate_get(f"/api/trace/job/{job_b}/events").text)
    assert [m["data"]["event"] for m in events if m.get("event") == "progress"] == ["created", "reused"]
    assert events[-1]["event"] == "end" and events[-1]["data"]["status"] == "completed"

    again = bob.simulate_post("/api/trace/events", json=request, headers={"Cache-Control": "no-cache"})
    fresh = wait_job(bob, again.json["job_id"])
    assert again.json["job_id"] not in (job_a, job_b)
    assert fresh["status"] == "completed" and fresh["reused_from"] is None and fresh["fresh"] is True
    assert count(statements) >= before + 6  # run again: every unit read the source

    metrics = bob.simulate_get("/metrics").text
    assert 'tracebus_result_reuse_total{kind="trace-evt",outcome="hit"} 1.0' in metrics
    assert 'tracebus_result_reuse_total{kind="trace-evt",outcome="fresh"} 1.0' in metrics


def test_an_identical_equipment_period_of_another_user_reads_nothing(clients, statements, equipment):
    ids, first_day, _ = equipment
    payload = equipment_body(ids, first_day, first_day[:4] + "-12-31", query_type="lots")  # > 30 days: a job
    alice, bob, carol = clients["alice"], clients["bob"], clients["carol"]

    def run(client, **headers) -> tuple[dict, dict]:
        resp = client.simulate_post(EQUIPMENT_PATH, json=payload, headers=headers or None)
        assert resp.status_code == 202, resp.text
        data = resp.json["data"]
        status, _ = poll_job_until_complete(client.simulate_get, data["status_url"], interval_s=0.05)
        return status, client.simulate_get(data["result_url"]).json["data"]

    status_a, answer_a = run(alice)
    before = count(statements)
    status_b, answer_b = run(bob)

    assert count(statements) == before and before > 0
    assert answer_b == answer_a and status_b["reused_from"].startswith("res-")
    assert status_a["job_id"] not in str(status_b)
    # /api/v1/jobs with fresh: true runs it again.
    resp = carol.simulate_post("/api/v1/jobs", json={"kind": "query-tool", "params": payload, "fresh": True})
    assert resp.status_code == 202, resp.text
    status_c, _ = poll_job_until_complete(carol.simulate_get, resp.json["status_url"], interval_s=0.05)
    assert status_c["status"] == "completed" and status_c["reused_from"] is None
    assert count(statements) > before
    assert carol.simulate_post("/api/v1/jobs", json={"kind": "query-tool", "params": payload,
                                                     "fresh": "yes"}).status_code == 400


def test_the_msd_page_reopened_by_another_user_is_answered_from_the_stored_result(
        api_settings, api_broker, statements, counting_workers):
    alice, bob = (app(api_settings, api_broker, statements, f"t-{u}", **ASYNC_STAGES) for u in ("alice", "bob"))

    def open_page(client) -> tuple[int, dict, dict]:
        """useTraceProgress.ts: seed-resolve, lineage, then the events stage (each a job here,
        polled to its end), and the aggregation read back."""
        _, seeds = run_stage(client, "/api/trace/seed-resolve", seed_body())
        _, lineage = run_stage(client, "/api/trace/lineage", lineage_body(seeds["seed_container_ids"]))
        events = {"profile": "mid_section_defect", "container_ids": seeds["seed_container_ids"],
                  "domains": ["upstream_history", "materials"], "lineage_query_id": lineage["query_id"],
                  "params": seed_body()["params"] | {"direction": "backward"}}
        resp = client.simulate_post("/api/trace/events", json=events)
        assert resp.status_code == 202, resp.text
        status, _ = poll_job_until_complete(client.simulate_get, resp.json["status_url"], interval_s=0.05,
                                            max_s=90)
        result = client.simulate_get(f"{resp.json['status_url']}/result").json
        return resp.json["job_id"], status, result

    job_a, status_a, result_a = open_page(alice)
    before = count(statements)
    job_b, status_b, result_b = open_page(bob)

    assert count(statements) == before and before > 0  # the reopened page read nothing
    assert status_a["status"] == status_b["status"] == "completed" and job_b != job_a
    assert status_b["reused_from"].startswith("res-") and job_a not in str(status_b)
    assert result_b["aggregation"] == result_a["aggregation"]
    tqid = status_b["trace_query_id"]
    detail = bob.simulate_get("/api/mid-section-defect/analysis/detail",
                              params={"trace_query_id": tqid, "page_size": 50}).json
    assert detail["success"] is True and detail["data"]["pagination"]["total_count"] == (
        result_a["aggregation"]["detail_total_count"])
    csv = bob.simulate_get("/api/mid-section-defect/export", params={"trace_query_id": tqid})
    assert csv.status_code == 200 and len(csv.text.strip().split("\r\n")) == (
        result_a["aggregation"]["detail_total_count"] + 1)


def test_another_users_identical_trace_in_flight_joins_it_and_ends_with_it(api_settings, api_broker, statements,
                                                                          sample_db):
    from tracebus.trace.synth import cids as all_cids

    idle = {"queue": "reuse-idle"}  # no worker reads it: alice's units are run here, one by one
    alice, bob, carol = (app(api_settings, api_broker, statements, f"t-{u}", **idle) for u in ("alice", "bob", "carol"))
    request = trace_body(all_cids(sample_db)[300:550])  # 3 units a domain
    first = alice.simulate_post("/api/trace/events", json=request)
    second = bob.simulate_post("/api/trace/events", json=request)
    assert first.status_code == 202
    job_a, job_b = first.json["job_id"], second.json["job_id"]
    waiting = bob.simulate_get(f"/api/trace/job/{job_b}")

    assert second.status_code == 202 and job_b != job_a and job_a not in second.text + waiting.text
    assert waiting.json["status"] == "queued" and waiting.json["user"] == "bob"
    settings = api_settings.replace(result_reuse_max_age_s=-1, **idle)
    source = CountingSqlite(sample_db, statements)
    try:
        before = count(statements)
        for unit in range(6):
            run_trace_unit_here(api_broker, settings, source, job_a, unit)
    finally:
        source.close()

    ended = bob.simulate_get(f"/api/trace/job/{job_b}").json
    events = parse_sse(bob.simulate_get(f"/api/trace/job/{job_b}/events").text)
    assert [m["data"]["event"] for m in events if m.get("event") == "progress"] == ["joined", "joined_ended"]
    assert events[-1]["data"]["status"] == "completed" and job_a not in str(events)
    assert count(statements) == before + 6  # alice's six units; bob's job ran none
    assert ended["status"] == "completed" and ended["reused_from"].startswith("res-")
    for domain in ("history", "materials"):
        assert page_all(bob, job_b, domain, 250) == page_all(alice, job_a, domain, 250)
    # Joined, then cancelled by its first user: the joined job fails, without naming it.
    third = alice.simulate_post("/api/trace/events", json=trace_body(all_cids(sample_db)[550:800]))
    fourth = carol.simulate_post("/api/trace/events", json=trace_body(all_cids(sample_db)[550:800]))
    assert alice.simulate_post(f"/api/v1/jobs/{third.json['job_id']}/cancel").status_code == 200
    failed = carol.simulate_get(f"/api/trace/job/{fourth.json['job_id']}").json
    assert failed["status"] == "failed" and third.json["job_id"] not in str(failed)
