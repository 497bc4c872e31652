"""The MSD page's calls end to end over HTTP (redis-server, the worker supervisor and gunicorn as
real processes) on the sample data: events job -> status -> result -> stream -> detail pages ->
export, with the KPIs checked against SQL written here, straight on the database."""

from __future__ import annotations

import json
import sqlite3
import urllib.error

import pytest

from tests.helpers import wait_for
from tests.test_e2e_http import System, call
from tracebus.trace.sources.sqlite import SqliteSource

WINDOW = ("2025-01-01", "2025-01-31")
STATION = "(UPPER({a}.WORKCENTERNAME) LIKE '%TMTT%' OR {a}.WORKCENTERNAME LIKE '%測試%')"
QTY = " + ".join(f"COALESCE(r.{c}, 0)" for c in ("REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY",
                                                 "PROCESSEDQTY", "DEFECTQTY"))
#: The detection KPIs of MSD.md §1.4: the lots' latest station track-in in the window (its
#: session's largest TRACKINQTY), and their station rejects in the window.
KPI_SQL = f"""
WITH t AS (
  SELECT h.CONTAINERID, MAX(h.TRACKINQTY) OVER (PARTITION BY h.CONTAINERID, h.TRACKINTIMESTAMP, h.EQUIPMENTID) AS q,
         ROW_NUMBER() OVER (PARTITION BY h.CONTAINERID ORDER BY h.TRACKINTIMESTAMP DESC) AS rn
  FROM DW_MES_LOTWIPHISTORY h
  WHERE {STATION.format(a="h")} AND h.EQUIPMENTID IS NOT NULL
    AND h.TRACKINTIMESTAMP >= :t0 AND h.TRACKINTIMESTAMP < :t1),
lots AS (SELECT CONTAINERID, q FROM t WHERE rn = 1),
rej AS (SELECT r.CONTAINERID, SUM({QTY}) AS d FROM DW_MES_LOTREJECTHISTORY r
        WHERE {STATION.format(a="r")} AND r.TXNDATE >= :t0 AND r.TXNDATE < :t1 GROUP BY r.CONTAINERID)
SELECT COUNT(*), SUM(lots.q), SUM(CASE WHEN rej.d > 0 THEN 1 ELSE 0 END), SUM(COALESCE(rej.d, 0))
FROM lots LEFT JOIN rej ON rej.CONTAINERID = lots.CONTAINERID
"""


@pytest.fixture(scope="module")
def msd_system(sample_db, tmp_path_factory):
    running = System(tmp_path_factory.mktemp("msd-e2e"), sample_db, TRACE_CHUNK_CIDS="40",
                     TRACE_JOB_MAX_INFLIGHT_UNITS="4")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def _get(url: str):
    try:
        with call("GET", url) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def _seeds(db) -> list[str]:
    source = SqliteSource(db)
    try:
        return sorted({r[0] for _, rows in source.detect_by_dates("測試", *WINDOW) for r in rows})
    finally:
        source.close()


def test_the_msd_page_calls_end_to_end(msd_system, sample_db):
    base, seeds = msd_system.base_url, _seeds(sample_db)
    body = {"profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
            "domains": ["upstream_history", "materials"], "cache_key": "x",
            "params": {"station": "測試", "direction": "backward", "start_date": WINDOW[0], "end_date": WINDOW[1]}}
    with call("POST", f"{base}/api/trace/events", body) as resp:
        assert resp.status == 202
        accepted = json.loads(resp.read())
    job_id = accepted["job_id"]

    def finished():
        doc = json.loads(_get(f"{base}/api/trace/job/{job_id}")[2])
        return doc if doc["status"] in ("completed", "failed") else None
    status = wait_for(finished, 60, interval_s=0.2, message="the MSD job")
    assert status["status"] == "completed" and status["query_id"] == job_id, status
    tqid = status["trace_query_id"]
    assert tqid.startswith("msd-") and status["cid_count"] == len(seeds)

    code, _, raw = _get(f"{base}/api/trace/job/{job_id}/result")
    result = json.loads(raw)
    assert code == 200 and result["trace_query_id"] == tqid and result["quality_meta"]["status"] == "complete"
    kpi = result["aggregation"]["kpi"]
    with sqlite3.connect(sample_db) as db:
        lots, total_input, defective, defect = db.execute(
            KPI_SQL, {"t0": f"{WINDOW[0]} 00:00:00", "t1": "2025-02-01 00:00:00"}).fetchone()
    assert (kpi["lot_count"], kpi["total_input"], kpi["defective_lot_count"], kpi["total_defect_qty"]) == (
        lots, total_input, defective, defect)
    assert kpi["total_defect_rate"] == round(defect / total_input * 100, 4)

    code, headers, raw = _get(f"{base}/api/trace/job/{job_id}/stream")
    lines = [json.loads(x) for x in raw.splitlines()]
    kinds = [x["type"] for x in lines]
    assert kinds.index("aggregation") < kinds.index("quality_meta") < kinds.index("complete")
    assert lines[kinds.index("aggregation")]["data"] == result["aggregation"]

    total = result["aggregation"]["detail_total_count"]
    seen = []
    for page in (1, 2, 3):
        code, _, raw = _get(f"{base}/api/mid-section-defect/analysis/detail?trace_query_id={tqid}"
                            f"&start_date={WINDOW[0]}&end_date={WINDOW[1]}&station=%E6%B8%AC%E8%A9%A6"
                            f"&direction=backward&page={page}&page_size=20&sort_by=defect_qty&order=desc")
        doc = json.loads(raw)
        assert code == 200 and doc["success"] is True, doc
        assert doc["data"]["pagination"]["total_count"] == total and doc["data"]["trace_query_id"] == tqid
        seen += [r["DEFECT_QTY"] for r in doc["data"]["detail"]]
    assert seen == sorted(seen, reverse=True) and len(seen) == min(60, total)

    code, headers, raw = _get(f"{base}/api/mid-section-defect/export?trace_query_id={tqid}")
    assert code == 200 and headers["Content-Type"].startswith("text/csv")
    assert f"defect_trace_{tqid}.csv" in headers["Content-Disposition"]
    text = raw.decode("utf-8")
    assert text.startswith("\ufeffCONTAINERID,") and len(text.strip().split("\r\n")) == total + 1

    # The same request again is a spool hit: 200 at once with the stored analysis (MSD.md §5);
    # a loss-reason filter the stored one was not computed with starts a new job.
    with call("POST", f"{base}/api/trace/events", body) as resp:
        hit = json.loads(resp.read())
        assert resp.status == 200 and hit["spool_hit"] is True and hit["results"] == {}
    assert hit["trace_query_id"] == tqid and hit["aggregation"] == result["aggregation"]
    reasons = result["aggregation"]["available_loss_reasons"][:1]
    filtered = {**body, "params": {**body["params"], "loss_reasons": reasons}}
    with call("POST", f"{base}/api/trace/events", filtered) as resp:
        assert resp.status == 202 and json.loads(resp.read())["job_id"] != job_id

    code, _, raw = _get(f"{base}/api/mid-section-defect/analysis/detail?trace_query_id=msd-0000000000000000")
    assert code == 410 and json.loads(raw)["error"]["code"] == "CACHE_EXPIRED" and json.loads(raw)["success"] is False
    code, _, raw = _get(f"{base}/api/mid-section-defect/analysis/detail?trace_query_id={tqid}&sort_by=nope")
    assert code == 400 and "sort_by" in json.loads(raw)["error"]["message"]
    code, _, raw = _get(f"{base}/api/mid-section-defect/analysis/detail?trace_query_id={tqid}&page=x")
    assert code == 400


@pytest.mark.parametrize("params, words", [
    ({"direction": "sideways"}, "direction"), ({"station": "no-such-station"}, "station"),
    ({"start_date": "2025-02-01", "end_date": "2025-01-01"}, "after"),
    ({"start_date": "2020-01-01", "end_date": "2025-01-01"}, "at most")])
def test_bad_msd_requests_are_400_with_a_message(msd_system, params, words):
    body = {"profile": "mid_section_defect", "container_ids": ["X"], "domains": ["upstream_history"],
            "params": {"station": "測試", "start_date": "2025-01-01", "end_date": "2025-01-02", **params}}
    try:
        call("POST", f"{msd_system.base_url}/api/trace/events", body)
        raise AssertionError("expected a 400")
    except urllib.error.HTTPError as e:
        assert e.code == 400
        assert words in json.loads(e.read())["error"]["message"]
