"""Chunking cannot change an MSD job's answer: over the sample data, the job's aggregation for
any chunk size, and with workers SIGKILLed mid-job, equals the library's single-unit answer."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.conftest_trace import start_workers, trace_service, units, wait_final
from tests.msdjob_support import aggregation_of, library_aggregation, library_detail_rows, run_job
from tracebus.engine.keys import GROUP, Keys
from tracebus.jobs.view import FINAL_STATES
from tracebus.trace.msd.job.detailstore import DetailStore
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources.sqlite import SqliteSource

WINDOW = ("2025-01-01", "2025-01-31")


def _body(db, direction="backward", **params) -> dict:
    source = SqliteSource(db)
    try:
        seeds = sorted({r[0] for _, rows in MsdReads(source).detect_by_dates("測試", *WINDOW) for r in rows})
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


def _kill_a_busy_worker(sup, svc, redis_client, job_id: str, killed: list[int]) -> bool:
    """SIGKILL a worker that holds a delivery of the trace queue (so it dies mid-message):
    both workers are frozen by SIGSTOP while the stream's pending entries are read. False when
    the job ended first."""
    stream = Keys(svc.settings.key_prefix).stream(svc.settings.queue)
    while svc.status(job_id)["state"] not in FINAL_STATES:
        pids = sup.wait_workers(2, without=killed)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            holders = {int(p["consumer"].decode().split(":")[1])
                       for p in redis_client.xpending_range(stream, GROUP, "-", "+", 100)}
            if busy := sorted(pids & holders):
                killed.append(busy[len(killed) % len(busy)])
                os.kill(killed[-1], signal.SIGKILL)
                return True
        finally:
            for pid in pids - set(killed):
                os.kill(pid, signal.SIGCONT)
        time.sleep(0.002)  # between two units: let them take the next
    return False


def test_sigkilled_workers_mid_job_leave_the_aggregation_unchanged(supervisor, redis_client, sample_db):
    # Given an MSD job of 3-CID units, two in flight, on two workers
    body = _body(sample_db)
    svc, env = trace_service(sample_db, TRACE_CHUNK_CIDS="3", TRACE_JOB_MAX_INFLIGHT_UNITS="2")
    sup = start_workers(supervisor, svc, env)
    job_id = svc.submit(svc.parse(body, "alice"))
    total = svc.status(job_id)["progress"]["units_total"]
    # When a worker holding one of its messages is SIGKILLed at a fifth, two fifths and three
    # fifths of its units
    killed: list[int] = []
    for fifth in (1, 2, 3):
        sup.wait(lambda n=total * fifth // 5: svc.status(job_id)["progress"]["units_done"] >= n
                 or svc.status(job_id)["state"] in FINAL_STATES, 60, f"{fifth}/5 of the units done")
        if not _kill_a_busy_worker(sup, svc, redis_client, job_id, killed):
            break
    # Then the job completes with the single-unit answer
    status = wait_final(sup, svc, job_id, 120)
    assert status["state"] == "completed", status
    reruns = [u["unit"] for u in units(svc, job_id) if u["attempt"] > 1]
    print(f"\n{len(killed)} workers killed mid-message ({total} units); units run more than once: {reruns}")
    assert len(killed) >= 2
    assert _without_meta(aggregation_of(svc, job_id)) == library_aggregation(sample_db, body)
