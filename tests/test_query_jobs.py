"""Query jobs as a declared kind (issue 28, item 2), with the query-tool equipment-period job ported.

Real redis-server, real trace workers (which run the query units), the Falcon TestClient, the
sample database's DW_MES_JOB. The page is followed as written (useEquipmentQuery.ts:
``envelope.data``; ``async === true`` -> poll ``status_url`` with useAsyncJobPolling.ts, GET
``result_url``, read its ``data``), and every answer is compared with the original's SQL
(sql/query_tool/equipment_jobs.sql) run on SQLite in the test.
"""

from __future__ import annotations

import datetime
import sqlite3

import duckdb
import pytest

from tests.api_support import api_broker, api_settings, make_client, trace_workers, user  # noqa: F401
from tests.test_e2e_contracts import poll_job_until_complete
from tracebus.trace.query import IN_LIMIT, KINDS, declared
from tracebus.trace.sources.queries import ORACLE

PATH = "/api/query-tool/equipment-period"
#: The original's equipment_jobs.sql, for SQLite (its dates are text).
ORIGINAL = """
SELECT JOBID, RESOURCEID, RESOURCENAME, JOBSTATUS, JOBMODELNAME, JOBORDERNAME, CREATEDATE, COMPLETEDATE,
       CAUSECODENAME, REPAIRCODENAME, SYMPTOMCODENAME, CONTAINERIDS, CONTAINERNAMES
FROM DW_MES_JOB
WHERE CREATEDATE >= :start_date AND CREATEDATE < date(:end_date, '+1 day') AND RESOURCEID IN ({ids})
ORDER BY RESOURCENAME, CREATEDATE DESC"""


@pytest.fixture
def client(api_settings, api_broker, trace_workers, user):
    return make_client(api_settings, api_broker, user)


@pytest.fixture(scope="module")
def equipment(sample_db) -> tuple[list[str], str, str]:
    """The ten busiest resources of DW_MES_JOB, and its first and last day."""
    with sqlite3.connect(sample_db) as db:
        ids = [r[0] for r in db.execute("SELECT RESOURCEID FROM DW_MES_JOB GROUP BY RESOURCEID "
                                        "ORDER BY count(*) DESC, RESOURCEID LIMIT 10")]
        first, last = db.execute("SELECT substr(min(CREATEDATE), 1, 10), substr(max(CREATEDATE), 1, 10) "
                                 "FROM DW_MES_JOB").fetchone()
    return ids, first, last


def original(sample_db, ids, start, end) -> list[dict]:
    with sqlite3.connect(sample_db) as db:
        db.row_factory = sqlite3.Row
        binds = {f"p{i}": v for i, v in enumerate(ids)}
        sql = ORIGINAL.format(ids=", ".join(f":p{i}" for i in range(len(ids))))
        return [dict(r) for r in db.execute(sql, {"start_date": start, "end_date": end, **binds})]


def ordered(rows: list[dict]) -> list[tuple]:
    """The ORDER BY keys: ties may come in any order, so rows are compared as multisets too."""
    return [(r["RESOURCENAME"], r["CREATEDATE"]) for r in rows]


def body(ids, start, end, query_type="jobs", **extra) -> dict:
    return {"equipment_ids": ids, "equipment_names": [], "start_date": start, "end_date": end,
            "query_type": query_type, **extra}


def fetch_equipment_period(client, payload) -> tuple[dict, int]:
    """useEquipmentQuery.ts::fetchEquipmentPeriod, line for line; returns (data, polls)."""
    resp = client.simulate_post(PATH, json=payload)
    assert resp.status_code in (200, 202), resp.text
    data = resp.json["data"]
    if data.get("async") is True and data.get("status_url"):
        _, polls = poll_job_until_complete(client.simulate_get, data["status_url"], interval_s=0.05)
        return client.simulate_get(data["result_url"]).json["data"], polls
    return data, 0


def test_a_short_span_is_answered_at_once_with_the_originals_rows(client, sample_db, equipment):
    ids, first, _ = equipment
    end = (datetime.date.fromisoformat(first) + datetime.timedelta(days=20)).isoformat()

    resp = client.simulate_post(PATH, json=body(ids, first, end))

    assert resp.status_code == 200 and resp.json["success"] is True
    data = resp.json["data"]
    expected = original(sample_db, ids, first, end)
    assert data["total"] == len(expected) > 0 and data["date_range"] == {"start": first, "end": end}
    assert ordered(data["data"]) == ordered(expected)
    assert sorted(map(str, data["data"])) == sorted(map(str, expected))


def test_thirty_days_or_more_is_a_job_polled_through_the_generic_contract(client, sample_db, equipment):
    ids, first, last = equipment

    resp = client.simulate_post(PATH, json=body(ids, first, last))
    accepted = resp.json["data"]
    data, polls = fetch_equipment_period(client, body(ids, first, last))

    assert resp.status_code == 202 and accepted["async"] is True and accepted["job_id"].startswith("query-tool-")
    assert accepted["status_url"] == f"/api/job/{accepted['job_id']}?prefix=query-tool"
    assert accepted["result_url"] == f"/api/job/{accepted['job_id']}/result?prefix=query-tool"
    expected = original(sample_db, ids, first, last)
    assert data["total"] == len(expected) > 0 and ordered(data["data"]) == ordered(expected)
    assert sorted(map(str, data["data"])) == sorted(map(str, expected))
    status = client.simulate_get(accepted["status_url"]).json["data"]
    days = (datetime.date.fromisoformat(last) - datetime.date.fromisoformat(first)).days + 1
    assert status["completed_stages"] == ["jobs"] and status["query_id"] == accepted["job_id"]
    assert client.simulate_get(f"/api/v1/jobs/{accepted['job_id']}").json["progress"]["units_total"] == -(-days // 10)


def test_id_lists_are_split_at_1000_and_the_answer_is_the_same(client, sample_db, equipment):
    ids, first, last = equipment
    many = [f"NO-SUCH-{i:05d}" for i in range(1500)] + ids

    data, _ = fetch_equipment_period(client, body(many, first, last))

    assert data["total"] == len(original(sample_db, ids, first, last))
    days = (datetime.date.fromisoformat(last) - datetime.date.fromisoformat(first)).days + 1
    job = KINDS["query-tool"]
    assert len(job.units(job.check(body(many, first, last)))) == -(-days // 10) * -(-len(many) // IN_LIMIT)


@pytest.mark.parametrize("change, words", [
    ({"start_date": None}, "請指定日期範圍"),
    ({"query_type": "weather"}, "不支援的查詢類型: weather"),
    ({"equipment_ids": []}, "請選擇至少一台設備"),
    ({"start_date": "2025-03-01", "end_date": "2025-02-01"}, "結束日期不可早於起始日期"),
    ({"start_date": "2022-01-01", "end_date": "2025-01-01"}, "日期範圍不可超過 730 天"),
    ({"end_date": "2025-02-30"}, "日期格式錯誤"),
    ({"equipment_ids": "EQ1"}, "equipment_ids must be a list of strings"),
])
def test_bad_requests_are_the_originals_400s(client, equipment, change, words):
    ids, first, last = equipment
    resp = client.simulate_post(PATH, json={**body(ids, first, last), **change})
    assert resp.status_code == 400 and resp.json["success"] is False and words in resp.json["error"]["message"]


def test_post_v1_jobs_submits_any_declared_kind_and_every_result_route_reads_it(client, sample_db, equipment,
                                                                               tmp_path):
    ids, first, _ = equipment
    end = (datetime.date.fromisoformat(first) + datetime.timedelta(days=5)).isoformat()  # short: a job anyway

    resp = client.simulate_post("/api/v1/jobs", json={"kind": "query-tool", "params": body(ids, first, end)})

    assert resp.status_code == 202, resp.text
    job_id = resp.json["job_id"]
    poll_job_until_complete(client.simulate_get, resp.json["status_url"], interval_s=0.05)
    expected = original(sample_db, ids, first, end)
    assert client.simulate_get(f"/api/job/{job_id}/result").json["data"]["total"] == len(expected)
    export = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"format": "parquet"})
    path = tmp_path / "jobs.parquet"
    path.write_bytes(export.content)
    db = duckdb.connect()
    assert db.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0] == len(expected)
    types = dict(db.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                            [str(path)]).fetchall())
    assert types["CREATEDATE"] == "TIMESTAMP" and types["JOBID"] == "VARCHAR"
    for bad in ({"kind": "nope", "params": {}}, {"kind": "query-tool"}, []):
        assert client.simulate_post("/api/v1/jobs", json=bad).status_code == 400


def test_the_statement_is_written_for_oracle_on_the_dwh_schema():
    sql = declared()["query-tool"].statements["jobs"].sql(ORACLE, 2)
    assert "FROM DWH.DW_MES_JOB" in sql and "TO_DATE(:w0, 'YYYY-MM-DD HH24:MI:SS')" in sql
    assert "TO_CHAR(CREATEDATE, 'YYYY-MM-DD HH24:MI:SS') AS CREATEDATE" in sql and "IN (:p0, :p1)" in sql


@pytest.mark.parametrize("dialect", ["oracle", "sqlite"])
def test_every_declared_statement_qualifies_against_the_real_dwh_schema(dialect):
    from tests.test_dwh_schema import unknown_names
    from tracebus.trace.sources.queries import SQLITE

    d = ORACLE if dialect == "oracle" else SQLITE
    found = {f"{kind.kind}.{name}": unknown_names(st.sql(d, 2), dialect)
             for kind in declared().values() for name, st in kind.statements.items()}
    assert found and {name: bad for name, bad in found.items() if bad} == {}


#: The original's equipment_lots.sql, for SQLite.
ORIGINAL_LOTS = """
SELECT h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTID, h.EQUIPMENTNAME, h.SPECNAME, h.TRACKINTIMESTAMP,
       h.TRACKOUTTIMESTAMP, h.TRACKINQTY, h.TRACKOUTQTY, h.FINISHEDRUNCARD, h.PJ_WORKORDER,
       TRIM(c.CONTAINERNAME) AS CONTAINERNAME, c.PJ_TYPE, c.PJ_BOP, c.FIRSTNAME AS WAFER_LOT_ID,
       TRIM(c.PRODUCTLINENAME) AS PRODUCTLINENAME
FROM DW_MES_LOTWIPHISTORY h LEFT JOIN DW_MES_CONTAINER c ON h.CONTAINERID = c.CONTAINERID
WHERE h.TRACKINTIMESTAMP >= :start_date AND h.TRACKINTIMESTAMP < date(:end_date, '+1 day')
  AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL AND h.EQUIPMENTID IN ({ids})"""
KEY = ("CONTAINERID", "EQUIPMENTID", "SPECNAME", "TRACKINTIMESTAMP")
NONKEY = ("WORKCENTERNAME", "EQUIPMENTNAME", "FINISHEDRUNCARD", "PJ_WORKORDER", "CONTAINERNAME", "PJ_TYPE",
          "PJ_BOP", "WAFER_LOT_ID", "PRODUCTLINENAME")


@pytest.fixture(scope="module")
def lot_equipment(sample_db) -> tuple[list[str], str, str]:
    """Ten busy tools of DW_MES_LOTWIPHISTORY with partial track-outs, and a 45-day span."""
    with sqlite3.connect(sample_db) as db:
        ids = [r[0] for r in db.execute(
            "SELECT EQUIPMENTID FROM DW_MES_LOTWIPHISTORY WHERE EQUIPMENTID IS NOT NULL GROUP BY EQUIPMENTID "
            "ORDER BY count(*) DESC, EQUIPMENTID LIMIT 10")]
    return ids, "2025-01-01", "2025-02-14"


def original_lots(sample_db, ids, start, end) -> list[dict]:
    """equipment_lots.sql, then aggregate_partial_trackouts as the original's pandas does it."""
    with sqlite3.connect(sample_db) as db:
        db.row_factory = sqlite3.Row
        sql = ORIGINAL_LOTS.format(ids=", ".join(f":p{i}" for i in range(len(ids))))
        rows = [dict(r) for r in db.execute(sql, {"start_date": start, "end_date": end,
                                                  **{f"p{i}": v for i, v in enumerate(ids)}})]
    out = []
    for key in sorted({tuple(r[k] for k in KEY) for r in rows}):
        group = [r for r in rows if tuple(r[k] for k in KEY) == key]
        if all(len({r[c] for r in group}) == 1 for c in NONKEY):
            def top(column):  # pandas' max skips NaN
                return max((r[column] for r in group if r[column] is not None), default=None)
            out.append({**group[0], "TRACKINQTY": top("TRACKINQTY"), "TRACKOUTTIMESTAMP": top("TRACKOUTTIMESTAMP"),
                        "TRACKOUTQTY": sum(r["TRACKOUTQTY"] or 0 for r in group), "partial_count": len(group)})
        else:
            out += [{**r, "partial_count": 1} for r in group]
    return out


def test_lots_collapse_partial_trackouts_and_page_as_the_original_sync_and_as_a_job(client, sample_db,
                                                                                 lot_equipment):
    ids, start, end = lot_equipment
    expected = original_lots(sample_db, ids, start, end)
    assert any(r["partial_count"] > 1 for r in expected)
    for span_end in (end, "2025-01-20"):  # 44 days: a job; 19 days: answered now
        full = original_lots(sample_db, ids, start, span_end)
        data, polls = fetch_equipment_period(client, body(ids, start, span_end, "lots", page=2, per_page=10))
        assert (polls > 0) == (span_end == end) and len(full) > 20
        assert data["total"] == len(full) and data["pagination"] == {
            "page": 2, "per_page": 10, "total": len(full), "total_pages": -(-len(full) // 10)}
        keys = [(r["TRACKINTIMESTAMP"], r["CONTAINERID"]) for r in data["data"]]
        assert keys == sorted((r["TRACKINTIMESTAMP"], r["CONTAINERID"]) for r in full)[10:20]
        everything, _ = fetch_equipment_period(client, body(ids, start, span_end, "lots", per_page=500))
        assert len(full) <= 500 and sorted(map(str, everything["data"])) == sorted(map(str, full))
    # container_names narrows as get_equipment_lots: UPPER(TRIM(CONTAINERNAME)) IN the names, stripped, upper-cased.
    picked = sorted({r["CONTAINERNAME"] for r in expected})[:3]
    given = [f" {n.lower()} " for n in picked] + ["NO-SUCH-LOT"]
    narrowed, polls = fetch_equipment_period(client, body(ids, start, end, "lots", per_page=500, container_names=given))
    want = [r for r in expected if r["CONTAINERNAME"].upper() in picked]
    assert polls > 0 and narrowed["total"] == len(want) > 0
    assert sorted(map(str, narrowed["data"])) == sorted(map(str, want))


def original_rejects(sample_db, ids, start, end) -> list[tuple]:
    """equipment_lot_rejects.sql computed in Python from the tables (KEEP (DENSE_RANK FIRST ORDER BY
    WORKCENTERSEQUENCE_GROUP) is the value of the lowest sequence's rows, NULLs last)."""
    with sqlite3.connect(sample_db) as db:
        specs: dict = {}
        for spec, wc, group, seq in db.execute("SELECT SPEC, WORK_CENTER, WORK_CENTER_GROUP, WORKCENTERSEQUENCE_GROUP "
                                               "FROM DW_MES_SPEC_WORKCENTER_V WHERE SPEC IS NOT NULL"):
            specs.setdefault(spec, []).append((wc, group, seq))
        spec_map = {}
        for spec, rows in specs.items():
            seqs = [s for _, _, s in rows if s is not None]
            first = [r for r in rows if r[2] == min(seqs)] if seqs else rows
            pick = lambda i: min((r[i] for r in first if r[i] is not None), default=None)  # noqa: E731
            spec_map[spec] = (pick(0), pick(1), min(seqs) if seqs else None)
        strip = lambda v: v.strip() if isinstance(v, str) else v  # noqa: E731
        lots = set()
        for cid, wc, spec in db.execute(
                f"SELECT CONTAINERID, WORKCENTERNAME, SPECNAME FROM DW_MES_LOTWIPHISTORY WHERE TRACKINTIMESTAMP >= ? "
                f"AND TRACKINTIMESTAMP < date(?, '+1 day') AND EQUIPMENTID IN ({','.join('?' * len(ids))})",
                [start, end, *ids]):
            lots.add((cid, strip((spec_map.get(strip(spec)) or (None,))[0]) or strip(wc)))
        containers = {r[0]: r for r in db.execute("SELECT CONTAINERID, CONTAINERNAME FROM DW_MES_CONTAINER")}
        out = []
        for cid, wc, spec, reason, total, txn in db.execute(
                "SELECT CONTAINERID, WORKCENTERNAME, SPECNAME, LOSSREASONNAME, COALESCE(REJECTQTY, 0) + "
                "COALESCE(STANDBYQTY, 0) + COALESCE(QTYTOPROCESS, 0) + COALESCE(INPROCESSQTY, 0) + "
                "COALESCE(PROCESSEDQTY, 0), TXNDATE FROM DW_MES_LOTREJECTHISTORY"):
            if (cid, strip(wc)) in lots:
                name = strip(containers[cid][1]) if cid in containers and containers[cid][1] else cid
                out.append((cid, name, strip(spec) or "(NA)", strip(reason) or "(未填寫)", total, txn))
        return out


def test_rejects_run_as_one_unit_and_are_the_originals_rows_in_its_order(client, sample_db, lot_equipment):
    ids, start, end = lot_equipment
    job = KINDS["query-tool"]
    assert len(job.units(job.check(body(ids, start, end, "rejects")))) == 1  # its DISTINCT spans the request

    data, polls = fetch_equipment_period(client, body(ids, start, end, "rejects"))
    short, _ = fetch_equipment_period(client, body(ids, start, "2025-01-20", "rejects"))

    expected = original_rejects(sample_db, ids, start, end)
    assert polls > 0 and data["total"] == len(expected) > 0
    got = [(r["CONTAINERID"], r["CONTAINERNAME"], r["SPECNAME"], r["LOSSREASONNAME"], r["REJECT_TOTAL_QTY"],
            r["TXNDATE"]) for r in data["data"]]
    assert sorted(got) == sorted(expected)
    keys = [(r["TXN_DAY"], r["WORKCENTERSEQUENCE_GROUP"]) for r in data["data"]]
    days = [k[0] for k in keys]
    assert days == sorted(days, reverse=True) and all(r["TXN_DAY"].endswith(" 00:00:00") for r in data["data"])
    assert short["total"] == len(original_rejects(sample_db, ids, start, "2025-01-20"))
    # workcenter_groups narrows as the original's WORKCENTER_FILTER, on the answer's WORKCENTER_GROUP.
    groups = sorted({r["WORKCENTER_GROUP"] for r in data["data"]})
    assert len(groups) > 2
    narrowed, _ = fetch_equipment_period(client, body(ids, start, end, "rejects", workcenter_groups=groups[:2]))
    want = [r for r in data["data"] if r["WORKCENTER_GROUP"] in groups[:2]]
    assert narrowed["total"] == len(want) > 0 and narrowed["data"] == want


def test_materials_by_equipment_name_as_one_unit(client, sample_db):
    with sqlite3.connect(sample_db) as db:
        names = [r[0] for r in db.execute("SELECT EQUIPMENTNAME FROM DW_MES_LOTMATERIALSHISTORY WHERE EQUIPMENTNAME "
                                          "IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 5")]
        expected = db.execute(
            f"SELECT EQUIPMENTNAME, MATERIALPARTNAME, SUM(QTYCONSUMED), COUNT(DISTINCT CONTAINERID) "
            f"FROM DW_MES_LOTMATERIALSHISTORY WHERE TXNDATE >= '2025-01-01' AND TXNDATE < '2025-03-02' "
            f"AND EQUIPMENTNAME IN ({','.join('?' * len(names))}) GROUP BY 1, 2", names).fetchall()
    payload = {**body([], "2025-01-01", "2025-03-01", "materials"), "equipment_names": names}

    data, polls = fetch_equipment_period(client, payload)

    assert polls > 0 and data["total"] == len(expected) > 0
    got = [(r["EQUIPMENTNAME"], r["MATERIALPARTNAME"], r["TOTAL_CONSUMED"], r["LOT_COUNT"]) for r in data["data"]]
    assert sorted(got) == sorted(expected)
    assert got == sorted(got, key=lambda r: (r[0], -r[2]))
    missing = client.simulate_post(PATH, json=body(["EQ"], "2025-01-01", "2025-03-01", "materials"))
    assert missing.status_code == 400 and "請選擇至少一台設備" in missing.json["error"]["message"]


#: The original's equipment_status_hours.sql, for SQLite (TXNDATE is text).
ORIGINAL_STATUS_HOURS = """
SELECT r.RESOURCEID, r.RESOURCENAME,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'PRD' THEN s.HOURS ELSE 0 END) AS PRD_HOURS,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'SBY' THEN s.HOURS ELSE 0 END) AS SBY_HOURS,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'UDT' THEN s.HOURS ELSE 0 END) AS UDT_HOURS,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'SDT' THEN s.HOURS ELSE 0 END) AS SDT_HOURS,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'EGT' THEN s.HOURS ELSE 0 END) AS EGT_HOURS,
    SUM(CASE WHEN s.NEWSTATUSNAME = 'NST' THEN s.HOURS ELSE 0 END) AS NST_HOURS,
    SUM(s.HOURS) AS TOTAL_HOURS,
    ROUND(SUM(CASE WHEN s.NEWSTATUSNAME = 'PRD' THEN s.HOURS ELSE 0 END) * 100.0 /
          NULLIF(SUM(CASE WHEN s.NEWSTATUSNAME IN ('PRD', 'SBY', 'UDT') THEN s.HOURS ELSE 0 END), 0), 2) AS OU_PERCENT
FROM DW_MES_RESOURCESTATUS_SHIFT s JOIN DW_MES_RESOURCE r ON s.HISTORYID = r.RESOURCEID
WHERE s.TXNDATE >= :start_date AND s.TXNDATE < date(:end_date, '+1 day') AND r.RESOURCEID IN ({ids})
GROUP BY r.RESOURCEID, r.RESOURCENAME
ORDER BY r.RESOURCENAME"""


def original_status_hours(sample_db, ids, start, end) -> dict:
    """equipment_status_hours.sql, then get_equipment_status_hours' totals, as the original's Python."""
    with sqlite3.connect(sample_db) as db:
        db.row_factory = sqlite3.Row
        sql = ORIGINAL_STATUS_HOURS.format(ids=", ".join(f":p{i}" for i in range(len(ids))))
        data = [dict(r) for r in db.execute(sql, {"start_date": start, "end_date": end,
                                                  **{f"p{i}": v for i, v in enumerate(ids)}})]
    total = {k: sum(r.get(k, 0) or 0 for r in data) for k in
             ("PRD_HOURS", "SBY_HOURS", "UDT_HOURS", "SDT_HOURS", "EGT_HOURS", "NST_HOURS", "TOTAL_HOURS")}
    denominator = total["PRD_HOURS"] + total["SBY_HOURS"] + total["UDT_HOURS"]
    total["OU_PERCENT"] = round(total["PRD_HOURS"] * 100.0 / denominator, 2) if denominator > 0 else 0
    return {"data": data, "total": len(data), "totals": total, "date_range": {"start": start, "end": end}}


def test_status_hours_are_the_originals_sums_and_totals_sync_and_as_a_job(client, sample_db, equipment,
                                                                          lot_equipment):
    # The tools of DW_MES_JOB and of the history, and one that is always idle (its OU% is NULL).
    with sqlite3.connect(sample_db) as db:
        idle = db.execute("SELECT HISTORYID FROM DW_MES_RESOURCESTATUS_SHIFT GROUP BY HISTORYID HAVING "
                          "SUM(NEWSTATUSNAME IN ('PRD', 'SBY', 'UDT')) = 0 ORDER BY 1 LIMIT 1").fetchone()[0]
    ids = list(dict.fromkeys(equipment[0] + lot_equipment[0] + [idle, "NO-SUCH-TOOL"]))
    job = KINDS["query-tool"]
    assert len(job.units(job.check(body(ids, "2025-01-01", "2025-02-14", "status_hours")))) == 1

    for start, end in (("2025-01-01", "2025-02-14"), ("2025-03-03", "2025-03-09")):  # 44 days: a job; 6: now
        data, polls = fetch_equipment_period(client, body(ids, start, end, "status_hours"))
        expected = original_status_hours(sample_db, ids, start, end)
        assert (polls > 0) == (end == "2025-02-14")
        assert data == expected and data["total"] == len(ids) - 1
        assert [r["OU_PERCENT"] for r in data["data"] if r["RESOURCEID"] == idle] == [None]
        days = (datetime.date.fromisoformat(end) - datetime.date.fromisoformat(start)).days + 1
        assert all(r["TOTAL_HOURS"] == 24 * days for r in data["data"])
        assert 0 < data["totals"]["OU_PERCENT"] < 100 and data["totals"]["TOTAL_HOURS"] == 24 * days * len(data["data"])
    none = client.simulate_post(PATH, json=body([], "2025-01-01", "2025-01-05", "status_hours"))
    assert none.status_code == 400 and "請選擇至少一台設備" in none.json["error"]["message"]


def test_a_parameter_a_statement_does_not_take_yet_is_a_400_rather_than_ignored():
    from tracebus.errors import InvalidParams
    from tracebus.jobs.fields import Choice, Day
    from tracebus.jobs.list_fields import Texts
    from tracebus.trace.query import QueryKind, Statement

    kind = QueryKind(kind="unported-example", selector="t", statements={
        "a": Statement(sql=lambda d, n: "SELECT 1 AS X", columns=(("X", "int64"),), unported=("extra",))},
        params=(Day("start_date", missing="{name} is required"), Day("end_date", missing="{name} is required"),
                Choice("t", choices=("a",), missing="{name} is required"), Texts("extra")))
    request = {"start_date": "2025-01-01", "end_date": "2025-01-02", "t": "a"}

    assert "extra" not in kind.check(request)  # not read by the statement: dropped
    with pytest.raises(InvalidParams, match="extra with t 'a' is not ported to tracebus yet"):
        kind.check({**request, "extra": ["v"]})
