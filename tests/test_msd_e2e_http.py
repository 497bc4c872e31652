"""The MSD page's calls end to end over HTTP (redis-server, the worker supervisor and gunicorn as
real processes) on the sample data: events job -> status -> result -> stream -> detail pages ->
export, with the KPIs checked against SQL written here, straight on the database."""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.parse

import pytest

from tests.helpers import wait_for
from tests.test_e2e_http import System, call
from tracebus.trace.msd.job.detailstore import BACKWARD_CSV
from tracebus.trace.msd.reads import MsdReads
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


def _seeds(db, station="測試") -> list[str]:
    source = SqliteSource(db)
    try:
        return sorted({r[0] for _, rows in MsdReads(source).detect_by_dates(station, *WINDOW) for r in rows})
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
    assert text.startswith("\ufeff" + ",".join(label for _, label in BACKWARD_CSV) + "\r\n")
    assert len(text.strip().split("\r\n")) == total + 1

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



DEFLASH = "{a}.WORKCENTERNAME LIKE '%去膠%'"
#: The workcenter groups after 去膠 (order 5) by their keywords; none of the sample's names
#: of those groups also holds a keyword of an earlier group.
AFTER_DEFLASH = " OR ".join(f"INSTR(UPPER(d.WORKCENTERNAME), '{k}') > 0" for k in (
    "水吹砂", "掛鍍", "滾鍍", "條鍍", "電鍍", "補鍍", "TOTAI", "BANDL", "移印", "切彎腳", "元件切割",
    "PKG_SAW", "TMTT", "測試"))
#: The forward detail rows of MSD.md §3 at 去膠, one per defect lot: its latest station track-in
#: in the window (that session's largest TRACKINQTY); its station rejects in the window, the
#: NULL-reason ones always counted, the others when their reason is selected; and its own
#: rejects at any later workcenter group, at any time.
FORWARD_SQL = f"""
WITH t AS (
  SELECT h.CONTAINERID, MAX(h.TRACKINQTY) OVER (PARTITION BY h.CONTAINERID, h.TRACKINTIMESTAMP, h.EQUIPMENTID) AS q,
         ROW_NUMBER() OVER (PARTITION BY h.CONTAINERID ORDER BY h.TRACKINTIMESTAMP DESC) AS rn
  FROM DW_MES_LOTWIPHISTORY h
  WHERE {DEFLASH.format(a="h")} AND h.EQUIPMENTID IS NOT NULL
    AND h.TRACKINTIMESTAMP >= :t0 AND h.TRACKINTIMESTAMP < :t1),
rej AS (SELECT r.CONTAINERID, SUM({QTY}) AS d FROM DW_MES_LOTREJECTHISTORY r
        WHERE {DEFLASH.format(a="r")} AND r.TXNDATE >= :t0 AND r.TXNDATE < :t1
          AND (r.LOSSREASONNAME IS NULL OR :all = 1 OR r.LOSSREASONNAME IN (SELECT value FROM json_each(:reasons)))
        GROUP BY r.CONTAINERID),
down AS (SELECT d.CONTAINERID, SUM({QTY.replace("r.", "d.")}) AS n FROM DW_MES_LOTREJECTHISTORY d
         WHERE {AFTER_DEFLASH} GROUP BY d.CONTAINERID)
SELECT c.CONTAINERNAME, t.q, rej.d, COALESCE(down.n, 0) FROM t JOIN rej ON rej.CONTAINERID = t.CONTAINERID
JOIN DW_MES_CONTAINER c ON c.CONTAINERID = t.CONTAINERID LEFT JOIN down ON down.CONTAINERID = t.CONTAINERID
WHERE t.rn = 1 AND rej.d > 0 AND (:pj IS NULL OR TRIM(c.PJ_TYPE) = :pj)
"""


def _forward_rows(db, reasons=None, pj=None) -> dict:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(FORWARD_SQL, {"t0": f"{WINDOW[0]} 00:00:00", "t1": "2025-02-01 00:00:00",
                                          "all": int(reasons is None), "reasons": json.dumps(reasons or []),
                                          "pj": pj}).fetchall()
    return {name: tuple(values) for name, *values in rows}


def _seen(rows) -> dict:
    return {r["CONTAINERNAME"]: (r["TRACKINQTY"], r["DEFECT_QTY"], r["DOWNSTREAM_TOTAL_REJECT"]) for r in rows}


def _pages(base, tqid, page_size, query="") -> tuple[list[dict], int]:
    rows, page = [], 1
    while True:
        code, _, raw = _get(f"{base}/api/mid-section-defect/analysis/detail?trace_query_id={tqid}&start_date="
                            f"{WINDOW[0]}&end_date={WINDOW[1]}&station={urllib.parse.quote('去膠')}&direction=forward"
                            f"&page={page}&page_size={page_size}{query}")
        doc = json.loads(raw)
        assert code == 200 and doc["success"] is True, doc
        pagination = doc["data"]["pagination"]
        rows += doc["data"]["detail"]
        if page >= pagination["total_pages"]:
            assert len(rows) == pagination["total_count"]
            return rows, pagination["total_count"]
        page += 1


def test_the_msd_forward_detail_pages_sorts_filters_and_exports(msd_system, sample_db):
    """The page loads the forward detail after every forward analysis: paged, sorted and
    filtered at read time like the backward one, its rows equal to SQL written here."""
    base, seeds = msd_system.base_url, _seeds(sample_db, "去膠")
    body = {"profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
            "domains": ["upstream_history", "downstream_rejects"],
            "params": {"station": "去膠", "direction": "forward", "start_date": WINDOW[0], "end_date": WINDOW[1]}}
    with call("POST", f"{base}/api/trace/events", body) as resp:
        assert resp.status == 202
        job_id = json.loads(resp.read())["job_id"]

    def finished():
        doc = json.loads(_get(f"{base}/api/trace/job/{job_id}")[2])
        return doc if doc["status"] in ("completed", "failed") else None
    status = wait_for(finished, 60, interval_s=0.2, message="the forward MSD job")
    assert status["status"] == "completed", status
    tqid = status["trace_query_id"]
    aggregation = json.loads(_get(f"{base}/api/trace/job/{job_id}/result")[2])["aggregation"]

    # The page's own call: no sort_by (the original's default, downstream reject rate, highest first).
    want = _forward_rows(sample_db)
    rows, total = _pages(base, tqid, 20)
    rows_by_rate = rows
    assert total == len(want) > 20 and _seen(rows) == want
    rates = [r["DOWNSTREAM_REJECT_RATE"] for r in rows]
    assert rates == sorted(rates, reverse=True) and rates[0] > 0
    # defect_qty sorts by the downstream rejects, as the original's forward detail does.
    walked = [r["DOWNSTREAM_TOTAL_REJECT"] for r in _pages(base, tqid, 40, "&sort_by=defect_qty&order=asc")[0]]
    assert walked == sorted(walked) and walked[-1] > walked[0]

    # Read-time filters: a loss reason (DEFECT_QTY recomputed over it) and a type, the top row's.
    top = next(r for r in rows if r["DETECTION_LOSS_REASON"] and r["PJ_TYPE"])
    reasons, pj = [top["DETECTION_LOSS_REASON"]], top["PJ_TYPE"]
    assert reasons[0] in aggregation["available_loss_reasons"]
    rows, total = _pages(base, tqid, 30, f"&loss_reasons={urllib.parse.quote(reasons[0])}"
                                         f"&pj_types[]={urllib.parse.quote(pj)}")
    want_filtered = _forward_rows(sample_db, reasons, pj.strip())
    assert total == len(want_filtered) > 0 and _seen(rows) == want_filtered

    code, headers, raw = _get(f"{base}/api/mid-section-defect/export?trace_query_id={tqid}")
    assert code == 200 and headers["Content-Type"].startswith("text/csv")
    lines = raw.decode("utf-8").strip().split("\r\n")
    # The original's CSV_COLUMNS_FORWARD, rows by downstream reject rate, highest first.
    assert lines[0] == "\ufeffLOT ID,偵測設備,前段不良原因,偵測投入,偵測不良,下游到達站數,下游不良總數,下游不良率(%)"
    assert len(lines) == len(want) + 1 and [line.split(",")[0] for line in lines[1:]] == [r["CONTAINERNAME"] for r in rows_by_rate]
    assert [tuple(line.split(",")[3:5]) for line in lines[1:]] == [(str(q), str(d)) for q, d, _ in (want[r["CONTAINERNAME"]] for r in rows_by_rate)]
