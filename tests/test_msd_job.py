"""The MSD events job on real workers: MSD.md §1.7's worked example with its exact numbers,
the detail rows it stores, and what the status, result and stream show."""

from __future__ import annotations

import sqlite3

import orjson
import pytest

from tests.conftest_trace import assert_every_key_expires, start_workers, trace_service, units, wait_final
from tests.msdjob_support import (EXAMPLE_LINEAGE, aggregation_of, build_example_db, example_body,
                                  library_aggregation, run_job)
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.errors import JobNotComplete
from tracebus.jobs.states import FINAL_STATES, JobState
from tracebus.trace.states import V1_STATUS
from tracebus.trace.msd.job import views
from tracebus.trace.msd.job.detailstore import DetailStore


@pytest.fixture
def example_db(tmp_path):
    return build_example_db(tmp_path / "example.db")


def _chart(items, *fields):
    return [tuple(i[f] for f in ("name", *fields)) for i in items]


@pytest.mark.parametrize("chunk_cids", [1, 1000])
def test_the_worked_example_gives_the_contract_numbers_whatever_the_chunk_size(supervisor, example_db, chunk_cids):
    svc, _, job_id, status = run_job(supervisor, example_db, example_body(), chunk_cids)
    assert status["state"] == "completed", status
    agg = aggregation_of(svc, job_id)
    assert agg["kpi"] == {"lot_count": 3, "total_input": 2300, "defective_lot_count": 2, "total_defect_qty": 60,
                          "total_defect_rate": 2.6087, "top_loss_reason": "A", "affected_machine_count": 4}
    assert agg["daily_trend"] == [{"date": "2025-01-01", "defect_qty": 60, "input_qty": 1500, "defect_rate": 4.0},
                                  {"date": "2025-01-02", "defect_qty": 0, "input_qty": 800, "defect_rate": 0.0}]
    assert agg["detail_total_count"] == 4
    fields = ("lot_count", "defect_qty", "input_qty", "defect_rate", "cumulative_pct")
    charts = agg["charts"]
    assert _chart(charts["by_machine"], *fields) == [("M1", 2, 60, 1500, 4.0, 50.0), ("M2", 1, 40, 1000, 4.0, 83.33),
                                                     ("M3", 1, 20, 500, 4.0, 100.0)]
    assert _chart(charts["by_loss_reason"], "defect_qty", "lot_count", "defect_rate", "cumulative_pct") == [
        ("A", 50, 2, 2.1739, 83.33), ("B", 10, 1, 0.4348, 100.0)]
    assert _chart(charts["by_detection_machine"], *fields) == [("T1", 1, 40, 1000, 4.0, 66.67),
                                                               ("T2", 1, 20, 500, 4.0, 100.0)]
    for name, key in (("by_workflow", "WF1"), ("by_wafer_root", "WAFER-1"), ("by_material", "P1")):
        assert _chart(charts[name], "lot_count", "defect_qty", "input_qty") == [(key, 2, 60, 1500)], name
    assert agg["materials_attribution"][0]["MATERIAL_PART_DESC"] == "Gold wire"
    assert agg["trace_query_id"] == status["trace_query_id"] and agg["trace_query_id"].startswith("msd-")
    assert agg["domain_quality_meta"]["upstream_history"]["status"] == "complete"


def test_the_worked_example_with_a_loss_reason_filter(supervisor, example_db):
    svc, _, job_id, status = run_job(supervisor, example_db, example_body({"loss_reasons": "A"}), 1)
    agg = aggregation_of(svc, job_id)
    assert (agg["kpi"]["total_defect_qty"], agg["kpi"]["total_defect_rate"], agg["detail_total_count"]) == (50, 2.1739, 3)
    assert _chart(agg["charts"]["by_machine"], "defect_qty", "input_qty", "defect_rate")[:2] == [
        ("M1", 50, 1500, 3.3333), ("M2", 30, 1000, 3.0)]


@ON_NODE_AND_CLUSTER
def test_status_result_stream_and_detail_of_the_worked_example(supervisor, example_db):
    svc, _, job_id, status = run_job(supervisor, example_db, example_body(), 2)
    tqid = status["trace_query_id"]
    assert status["domains"] == ["upstream_history", "materials"] and status["cid_count"] == 3
    doc = orjson.loads(b"".join(svc.full_result(job_id)))
    assert doc["aggregation"]["kpi"]["total_defect_qty"] == 60 and doc["trace_query_id"] == tqid
    assert doc["query_id"] == job_id and doc["quality_meta"]["status"] == "complete"
    assert doc["results"]["upstream_history"]["data"] == [] and doc["results"]["upstream_history"]["total"] > 0
    lines = [orjson.loads(x) for x in b"".join(svc.stream(job_id)).splitlines()]
    kinds = [x["type"] for x in lines]
    assert kinds[0] == "meta" and kinds[-3:] == ["aggregation", "quality_meta", "complete"], kinds
    assert lines[0]["trace_query_id"] == tqid
    details = DetailStore(svc.store)
    page = details.page(tqid, page=1, page_size=3, sort_by="defect_qty", order="desc")
    assert page["pagination"] == {"page": 1, "page_size": 3, "total_count": 4, "total_pages": 2}
    assert [(r["CONTAINERID"], r["LOSS_REASON"], r["DEFECT_QTY"]) for r in page["detail"]] == [
        ("L1", "A", 30), ("L2", "A", 20), ("L1", "B", 10)]
    first = page["detail"][0]
    assert (first["ANCESTOR_COUNT"], first["UPSTREAM_MACHINE_COUNT"], first["WAFER_ROOT"]) == (1, 3, "WAFER-1")
    # No station filter in the detail: the material row's machine (DBX, no group) counts too.
    assert first["UPSTREAM_MACHINES"] == [{"station": "(未知)", "machine": "DBX"}, {"station": "成型", "machine": "M2"}, {"station": "測試", "machine": "T1"},
                                          {"station": "焊接_WB", "machine": "M1"}]
    assert first["UPSTREAM_MATERIALS"] == [{"part": "P1", "lot": "PL1"}]
    filtered = details.page(tqid, loss=["B"], sort_by="input_qty", order="asc")
    assert [(r["CONTAINERID"], r["LOSS_REASON"]) for r in filtered["detail"]] == [("L3", ""), ("L1", "B")]
    assert filtered["pagination"]["total_count"] == 2
    csv = "".join(details.export_csv(tqid))
    assert csv.startswith("\ufeffLOT ID,TYPE,PACKAGE,WORKFLOW,偵測設備,投入數,報廢原因,不良數,不良率(%),上游LOT數,上游台數\r\n")
    assert csv.count("\r\n") == 5 and "\r\nLOT-1,PJA,PKG1,WF1,T1,1000,A,30,3.0,1,3\r\n" in csv
    # Every key the job wrote (its partials, artifacts, detail rows and orderings) expires.
    assert_every_key_expires(svc.store.redis, svc, [job_id])


def test_a_failed_domain_leaves_the_aggregation_with_a_partial_quality_meta(supervisor, example_db):
    with sqlite3.connect(example_db) as db:
        db.execute("DROP TABLE DW_MES_LOTMATERIALSHISTORY")  # every materials unit fails at once
    svc, _, job_id, status = run_job(supervisor, example_db, example_body(), 2)
    assert status["status"] == "completed" and status["failed_domains"] == ["materials"], status
    assert status["code"] == "EVENTS_PARTIAL_FAILURE"
    doc = orjson.loads(b"".join(svc.full_result(job_id)))
    assert doc["code"] == "EVENTS_PARTIAL_FAILURE" and doc["failed_domains"] == ["materials"]
    assert doc["domain_quality_meta"]["materials"]["status"] == "failed"
    assert doc["domain_quality_meta"]["materials"]["reasons"] == ["domain_fetch_failed"]
    assert doc["quality_meta"]["status"] == "partial" and "domain_failure" in doc["quality_meta"]["reasons"]
    agg = doc["aggregation"]
    assert agg["kpi"]["total_defect_qty"] == 60 and agg["charts"]["by_material"] == []
    assert [i["name"] for i in agg["charts"]["by_machine"]] == ["M1", "M2", "M3"]


def test_a_twin_request_with_another_lineage_leaves_the_running_jobs_lineage_alone(supervisor, example_db):
    # Given alice's worked example admitted (its units queued, no worker yet), and the same
    # request again while it is in flight, but with a lineage in which W1 is nobody's ancestor
    svc, env = trace_service(example_db, TRACE_CHUNK_CIDS="1000")
    first = svc.submit(svc.parse(example_body(), "alice"))
    assert svc.submit(svc.parse(example_body(), "alice")) == first  # the same lineage: its twin
    flat = {"ancestors": {"L1": [], "L2": [], "L3": []},
            "seed_roots": {"L1": "LOT-1", "L2": "LOT-2", "L3": "LOT-3"}, "names": EXAMPLE_LINEAGE["names"]}
    second = svc.submit(svc.parse(example_body(lineage=flat), "alice"))
    # When the jobs run
    sup = start_workers(supervisor, svc, env)
    for job_id in {first, second}:
        assert wait_final(sup, svc, job_id, 60)["state"] == "completed"
    # Then the first job's answer is its own lineage's (W1's M1 upstream of both defect lots),
    # and the second request's is its lineage's: neither lineage went into the other's job
    assert [i["name"] for i in aggregation_of(svc, first)["charts"]["by_machine"]] == ["M1", "M2", "M3"]
    for job_id, body in ((first, example_body()), (second, example_body(lineage=flat))):
        got = aggregation_of(svc, job_id)
        del got["domain_quality_meta"]
        assert got == library_aggregation(example_db, body)


def test_a_retried_msd_job_reduces_after_its_re_run_detail_and_rebuilds_its_orderings(supervisor, example_db):
    # Given the worked example, one lot per chunk, whose detail units failed (the reject history
    # was away), and so its finalize (its orderings unit, chunk 1, ran on no rows)
    with sqlite3.connect(example_db) as db:
        db.execute("ALTER TABLE DW_MES_LOTREJECTHISTORY RENAME TO AWAY")
    svc, sup, job_id, _ = run_job(supervisor, example_db, example_body(), 1)
    sup.wait(lambda: svc.store.status(job_id)["status"] in FINAL_STATES, 60, f"job {job_id}'s units to settle")
    plan = svc.store.plan(job_id)
    assert {plan.section_of(u["unit"]) for u in units(svc, job_id) if u["state"] == "failed"} == {"detail", "finalize"}
    # (it reads failed once it has ended, not while other units still run: a poller stops there)
    assert svc.status(job_id)["state"] == "failed" and svc.status(job_id)["error"]
    running = views.status({**svc.store.status(job_id), "status": "running"})
    assert (running["state"], running["status"]) == ("running", V1_STATUS[JobState.RUNNING])
    with sqlite3.connect(example_db) as db:
        db.execute("ALTER TABLE AWAY RENAME TO DW_MES_LOTREJECTHISTORY")
    # When it is retried, then only detail units are sent (the finalize reduces their partials)
    taken = svc.store.retry(job_id)
    assert {plan.section_of(u) for u in taken} == {"detail"}, taken
    svc.dispatcher.send(job_id, taken)
    # And the job ends with the worked example's answer and its detail rows
    assert wait_final(sup, svc, job_id, 60)["state"] == "completed"
    agg = aggregation_of(svc, job_id)
    assert agg["kpi"] == {"lot_count": 3, "total_input": 2300, "defective_lot_count": 2, "total_defect_qty": 60,
                          "total_defect_rate": 2.6087, "top_loss_reason": "A", "affected_machine_count": 4}
    page = DetailStore(svc.store).page(agg["trace_query_id"], page_size=10, sort_by="defect_qty")
    assert [(r["CONTAINERID"], r["DEFECT_QTY"]) for r in page["detail"]] == [("L1", 30), ("L2", 20), ("L1", 10), ("L3", 0)]
    # (an aggregation is not served while its job runs: a retry's re-run may replace it)
    with pytest.raises(JobNotComplete):
        views.load(svc.store, {**svc.status(job_id), "state": "running", "status": "running"})
