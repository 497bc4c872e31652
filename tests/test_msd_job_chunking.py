"""Chunking cannot change an MSD job's answer: over the sample data, the job's aggregation for
any chunk size, and with workers SIGKILLed mid-job, equals the library's single-unit answer."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest_trace import start_workers, trace_service, units, wait_final
from tests.msdjob_support import aggregation_of, library_aggregation, library_detail_rows, run_job
from tracebus.trace.msd.job.detailstore import DetailStore
from tracebus.jobs.view import FINAL_STATES
from tracebus.trace.sources.sqlite import SqliteSource

WINDOW = ("2025-01-01", "2025-01-31")


def _body(db, direction="backward", **params) -> dict:
    source = SqliteSource(db)
    try:
        seeds = sorted({r[0] for _, rows in source.detect_by_dates("測試", *WINDOW) for r in rows})
    finally:
        source.close()
    domains = ["upstream_history", "materials" if direction == "backward" else "downstream_rejects"]
    return {"profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
            "domains": domains, "params": {"station": "測試", "direction": direction, "start_date": WINDOW[0],
                                           "end_date": WINDOW[1], **params}}


def _without_meta(aggregation: dict) -> dict:
    return {k: v for k, v in aggregation.items() if k != "domain_quality_meta"}


@pytest.mark.parametrize("chunk_cids", [7, 50, 1000])
def test_the_job_aggregation_equals_the_single_unit_answer_for_any_chunk_size(supervisor, sample_db, chunk_cids):
    body = _body(sample_db)
    svc, _, job_id, status = run_job(supervisor, sample_db, body, chunk_cids)
    assert status["state"] == "completed", status
    expected = library_aggregation(sample_db, body)
    assert expected["kpi"]["defective_lot_count"] > 10 and expected["charts"]["by_machine"]
    assert _without_meta(aggregation_of(svc, job_id)) == expected
    details, stored, page = DetailStore(svc.store), [], 1
    while rows := details.page(status["trace_query_id"], page=page, page_size=500)["detail"]:
        stored += rows
        page += 1
    want = library_detail_rows(sample_db, body)
    assert len(stored) == expected["detail_total_count"] == len(want)
    assert sorted(map(_canonical, stored)) == sorted(map(_canonical, want))
    # Every ordering breaks ties by lot, then reason (input_qty has many ties), both ways.
    for order in ("asc", "desc"):
        walked, page = [], 1
        while rows := details.page(status["trace_query_id"], page=page, page_size=500, sort_by="input_qty",
                                   order=order)["detail"]:
            walked += [(r["INPUT_QTY"] or 0, r["CONTAINERID"], r["LOSS_REASON"]) for r in rows]
            page += 1
        assert walked == sorted(walked, reverse=order == "desc")
        assert len({qty for qty, _, _ in walked}) < len(walked)  # ties, so the tie-break decides


def _canonical(row: dict) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("params", [{"direction": "forward"}, {"loss_reasons": "外觀不良,溢膠", "pj_types": ["SOD-123", "SOT-26"]}])
def test_forward_and_masked_jobs_equal_the_single_unit_answer(supervisor, sample_db, params):
    body = _body(sample_db, **params)
    svc, _, job_id, status = run_job(supervisor, sample_db, body, 9)
    assert status["state"] == "completed", status
    assert _without_meta(aggregation_of(svc, job_id)) == library_aggregation(sample_db, body)


def test_sigkilled_workers_mid_job_leave_the_aggregation_unchanged(supervisor, sample_db):
    body = _body(sample_db)
    svc, env = trace_service(sample_db, TRACE_CHUNK_CIDS="3", TRACE_JOB_MAX_INFLIGHT_UNITS="2")
    sup = start_workers(supervisor, svc, env)
    job_id = svc.submit(svc.parse(body, "alice"))
    killed = []
    for threshold in (40, 140, 260, 380):
        sup.wait(lambda n=threshold: svc.status(job_id)["progress"]["units_done"] >= n
                 or svc.status(job_id)["state"] in FINAL_STATES, 60, f"{threshold} units done")
        if svc.status(job_id)["state"] in FINAL_STATES:
            break
        pid = sorted(sup.wait_workers(2, without=killed))[len(killed) % 2]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    status = wait_final(sup, svc, job_id, 120)
    assert status["state"] == "completed", status
    reruns = [u["unit"] for u in units(svc, job_id) if u["attempt"] > 1]
    print(f"\n{len(killed)} workers killed; units run more than once: {reruns}")
    assert len(killed) >= 2
    assert _without_meta(aggregation_of(svc, job_id)) == library_aggregation(sample_db, body)
