"""The query-tool equipment-period job, ported from the original as the worked example.

The original: ``POST /api/query-tool/equipment-period`` (routes/query_tool_routes.py) with
``{equipment_ids, equipment_names, start_date, end_date, query_type}``; a span of 30 days or
more is an RQ job of prefix ``query-tool`` (202 ``{async, job_id, status_url, result_url}``,
polled through ``/api/job/<id>?prefix=query-tool``), a shorter one is answered at once; the
page (query-tool/composables/useEquipmentQuery.ts) reads ``data`` of either answer.

Ported statements (the original's SQL files, on the real DWH tables):

* ``jobs``: sql/query_tool/equipment_jobs.sql, the JOB records of the equipment (DW_MES_JOB,
  ``RESOURCEID`` = EQUIPMENTID) created in the window, by RESOURCENAME then newest first;
* ``lots``: sql/query_tool/equipment_lots.sql, the lots tracked in on the equipment in the
  window (DW_MES_LOTWIPHISTORY with DW_MES_CONTAINER), then as get_equipment_lots: partial
  track-outs collapsed (query_tool_sql_runtime.aggregate_partial_trackouts, strict guard), and
  the page ``page``/``per_page`` (200 by default, at most 500) with its ``pagination``;

* ``rejects``: sql/query_tool/equipment_lot_rejects.sql, the reject events of the lots tracked
  in on the equipment in the span at the same workcenter (DW_MES_LOTWIPHISTORY, the spec map of
  DW_MES_SPEC_WORKCENTER_V, DW_MES_LOTREJECTHISTORY, DW_MES_CONTAINER); its DISTINCT lots span
  the whole request, so it runs as one unit (``split=False``);
* ``materials``: sql/query_tool/equipment_materials.sql, material consumed per equipment (by
  its *name*, ``equipment_names``) and part, with its lot count (a GROUP BY: one unit).

* ``status_hours``: sql/query_tool/equipment_status_hours.sql, each equipment's hours by status
  (DW_MES_RESOURCESTATUS_SHIFT with DW_MES_RESOURCE, HISTORYID = RESOURCEID) and its OU% =
  PRD / (PRD + SBY + UDT), by RESOURCENAME; then as get_equipment_status_hours, the ``totals``
  over the equipment (:func:`status_hours_post`). A GROUP BY with a ratio: one unit.

Every query type and parameter of the original is ported: ``lots`` narrowed by
``container_names`` (UPPER(TRIM(CONTAINERNAME)) IN the names, upper-cased) and ``rejects`` by
``workcenter_groups`` (the answer's WORKCENTER_GROUP IN the groups, the original's
WORKCENTER_FILTER), each its statement's ``narrow``.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

from tracebus.jobs.fields import Choice, Day, Int
from tracebus.jobs.list_fields import Texts
from tracebus.trace.query import Http, QueryKind, Statement, declare, in_list
from tracebus.trace.query.answers import order_rows
from tracebus.trace.sources.queries import Dialect

#: The original's query types (every one is ported).
QUERY_TYPES = ("status_hours", "lots", "materials", "rejects", "jobs")


def jobs_sql(d: Dialect, n_ids: int) -> str:
    binds = ", ".join(f":p{i}" for i in range(n_ids))
    return f"""
SELECT JOBID, RESOURCEID, RESOURCENAME, JOBSTATUS, JOBMODELNAME, JOBORDERNAME,
       {d.ts('CREATEDATE')} AS CREATEDATE, {d.ts('COMPLETEDATE')} AS COMPLETEDATE,
       CAUSECODENAME, REPAIRCODENAME, SYMPTOMCODENAME, CONTAINERIDS, CONTAINERNAMES
FROM {d.tables['DW_MES_JOB']}
WHERE CREATEDATE >= {d.date_bind(':w0')} AND CREATEDATE < {d.date_bind(':w1')}
  AND RESOURCEID IN ({binds})
ORDER BY RESOURCENAME, CREATEDATE DESC"""


_TEXT = ("JOBID", "RESOURCEID", "RESOURCENAME", "JOBSTATUS", "JOBMODELNAME", "JOBORDERNAME")
JOBS = Statement(
    sql=jobs_sql,
    columns=tuple((c, "string") for c in _TEXT) + (("CREATEDATE", "timestamp"), ("COMPLETEDATE", "timestamp"))
    + tuple((c, "string") for c in ("CAUSECODENAME", "REPAIRCODENAME", "SYMPTOMCODENAME", "CONTAINERIDS",
                                    "CONTAINERNAMES")),
    order=(("RESOURCENAME", False), ("CREATEDATE", True)), ids="equipment_ids")

def lots_sql(d: Dialect, n_ids: int, n_names: int = 0) -> str:
    binds = ", ".join(f":p{i}" for i in range(n_ids))
    # get_equipment_lots: UPPER(TRIM(c.CONTAINERNAME)) IN the names, stripped and upper-cased.
    narrowed = f"\n  AND {in_list('UPPER(TRIM(c.CONTAINERNAME))', n_names, 'n')}" if n_names else ""
    return f"""
SELECT h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTID, h.EQUIPMENTNAME, h.SPECNAME,
       {d.ts('h.TRACKINTIMESTAMP')} AS TRACKINTIMESTAMP, {d.ts('h.TRACKOUTTIMESTAMP')} AS TRACKOUTTIMESTAMP,
       h.TRACKINQTY, h.TRACKOUTQTY, h.FINISHEDRUNCARD, h.PJ_WORKORDER, TRIM(c.CONTAINERNAME) AS CONTAINERNAME,
       c.PJ_TYPE, c.PJ_BOP, c.FIRSTNAME AS WAFER_LOT_ID, TRIM(c.PRODUCTLINENAME) AS PRODUCTLINENAME
FROM {d.tables['DW_MES_LOTWIPHISTORY']} h
LEFT JOIN {d.tables['DW_MES_CONTAINER']} c ON h.CONTAINERID = c.CONTAINERID
WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':w0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':w1')}
  AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL
  AND h.EQUIPMENTID IN ({binds}){narrowed}
ORDER BY h.EQUIPMENTNAME, h.TRACKINTIMESTAMP"""


#: aggregate_partial_trackouts' key and the columns that must agree within a key.
PARTIAL_KEY = ("CONTAINERID", "EQUIPMENTID", "SPECNAME", "TRACKINTIMESTAMP")
PARTIAL_NONKEY = ("WORKCENTERNAME", "EQUIPMENTNAME", "FINISHEDRUNCARD", "PJ_WORKORDER", "CONTAINERNAME",
                  "PJ_TYPE", "PJ_BOP", "WAFER_LOT_ID", "PRODUCTLINENAME")


def collapse_partial_trackouts(rows: list[dict]) -> list[dict]:
    """The original's aggregate_partial_trackouts: the rows of one (lot, equipment, spec, track-in)
    collapse to one (TRACKINQTY max, TRACKOUTTIMESTAMP max, TRACKOUTQTY summed, ``partial_count``)
    when every other column agrees, else stay as they are with ``partial_count`` 1; then by
    TRACKINTIMESTAMP (NULLs last), CONTAINERID."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in PARTIAL_KEY), []).append(row)
    merged, raw = [], []
    for group in groups.values():
        if all(len({r[c] for r in group}) == 1 for c in PARTIAL_NONKEY):
            out = dict(group[0])
            ins = [r["TRACKINQTY"] for r in group if r["TRACKINQTY"] is not None]
            outs = [r["TRACKOUTTIMESTAMP"] for r in group if r["TRACKOUTTIMESTAMP"] is not None]
            out.update(TRACKINQTY=max(ins) if ins else None, TRACKOUTTIMESTAMP=max(outs) if outs else None,
                       TRACKOUTQTY=sum(r["TRACKOUTQTY"] or 0 for r in group), partial_count=len(group))
            merged.append(out)
        else:
            raw += [{**r, "partial_count": 1} for r in group]
    return order_rows(merged + raw, (("TRACKINTIMESTAMP", False), ("CONTAINERID", False)))


def lots_post(rows: list[dict], params: dict) -> tuple[list[dict], dict]:
    """Collapsed, then one page, as get_equipment_lots answers (``pagination``)."""
    rows = collapse_partial_trackouts(rows)
    total, per_page = len(rows), params["per_page"]
    pages = max(1, -(-total // per_page))
    page = max(1, min(params["page"], pages))
    return rows[(page - 1) * per_page:page * per_page], {
        "total": total, "pagination": {"page": page, "per_page": per_page, "total": total, "total_pages": pages}}


def lots_stream_post(rows: Iterator[dict], params: dict) -> tuple[Iterator[dict], Callable[[], dict]]:
    """:func:`lots_post` over rows merged in :data:`LOTS_UNIT_ORDER`, holding one run of rows
    of a (track-in, lot) and two pages at most: the rows a partial track-out collapses share
    that run, and within it come in the order :func:`lots_post` reads them (equipment name,
    then as stored), so collapsing run by run gives its rows in its order."""
    per_page, wanted = params["per_page"], params["page"]
    extra: dict = {}

    def page() -> Iterator[dict]:
        chosen, last, total = [], [], 0
        for _, run in itertools.groupby(rows, key=lambda r: (r["TRACKINTIMESTAMP"], r["CONTAINERID"])):
            for row in collapse_partial_trackouts(list(run)):
                if total // per_page == wanted - 1:
                    chosen.append(row)
                if total % per_page == 0:
                    last = []
                last.append(row)
                total += 1
        pages = max(1, -(-total // per_page))
        at = max(1, min(wanted, pages))
        extra.update(total=total, pagination={"page": at, "per_page": per_page, "total": total, "total_pages": pages})
        yield from (chosen if at == wanted else last if total else [])

    return page(), lambda: extra


#: The order a lots unit stores its rows in: track-in, lot, then the statement's order.
LOTS_UNIT_ORDER = (("TRACKINTIMESTAMP", False), ("CONTAINERID", False), ("EQUIPMENTNAME", False))

LOTS = Statement(
    sql=lots_sql,
    columns=(("CONTAINERID", "string"), ("WORKCENTERNAME", "string"), ("EQUIPMENTID", "string"),
             ("EQUIPMENTNAME", "string"), ("SPECNAME", "string"), ("TRACKINTIMESTAMP", "timestamp"),
             ("TRACKOUTTIMESTAMP", "timestamp"), ("TRACKINQTY", "int64"), ("TRACKOUTQTY", "int64"),
             ("FINISHEDRUNCARD", "string"), ("PJ_WORKORDER", "string"), ("CONTAINERNAME", "string"),
             ("PJ_TYPE", "string"), ("PJ_BOP", "string"), ("WAFER_LOT_ID", "string"), ("PRODUCTLINENAME", "string")),
    order=(("EQUIPMENTNAME", False), ("TRACKINTIMESTAMP", False)), ids="equipment_ids", post=lots_post,
    unit_order=LOTS_UNIT_ORDER, stream_post=lots_stream_post,
    narrow="container_names", narrow_value=str.upper, reads=("page", "per_page"))

def rejects_sql(d: Dialect, n_ids: int, n_groups: int = 0) -> str:
    t = d.tables
    qty = {c: f"COALESCE(r.{c}, 0)" for c in ("REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY",
                                                "PROCESSEDQTY", "DEFECTQTY")}
    sql = f"""
WITH spec_ranked AS (
    SELECT SPEC, WORK_CENTER, WORK_CENTER_GROUP, WORKCENTERSEQUENCE_GROUP,
           DENSE_RANK() OVER (PARTITION BY SPEC ORDER BY WORKCENTERSEQUENCE_GROUP NULLS LAST) AS RK
    FROM {t['DW_MES_SPEC_WORKCENTER_V']} WHERE SPEC IS NOT NULL
), spec_map AS (
    SELECT SPEC, MIN(CASE WHEN RK = 1 THEN WORK_CENTER END) AS WORK_CENTER,
           MIN(CASE WHEN RK = 1 THEN WORK_CENTER_GROUP END) AS WORKCENTER_GROUP,
           MIN(WORKCENTERSEQUENCE_GROUP) AS WORKCENTERSEQUENCE_GROUP
    FROM spec_ranked GROUP BY SPEC
), wip_lots AS (
    SELECT DISTINCT h.CONTAINERID, COALESCE(TRIM(sm_eq.WORK_CENTER), TRIM(h.WORKCENTERNAME)) AS EQ_WORKCENTERNAME
    FROM {t['DW_MES_LOTWIPHISTORY']} h LEFT JOIN spec_map sm_eq ON sm_eq.SPEC = TRIM(h.SPECNAME)
    WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':w0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':w1')}
      AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL AND {in_list('h.EQUIPMENTID', n_ids)}
)
SELECT r.CONTAINERID, COALESCE(TRIM(c.CONTAINERNAME), TRIM(r.CONTAINERID)) AS CONTAINERNAME,
       COALESCE(TRIM(sm.WORK_CENTER), COALESCE(TRIM(r.WORKCENTERNAME), '(NA)')) AS WORKCENTERNAME,
       COALESCE(TRIM(sm.WORKCENTER_GROUP), COALESCE(TRIM(r.WORKCENTERNAME), '(NA)')) AS WORKCENTER_GROUP,
       COALESCE(sm.WORKCENTERSEQUENCE_GROUP, '999') AS WORKCENTERSEQUENCE_GROUP,
       COALESCE(TRIM(c.PRODUCTLINENAME), '(NA)') AS PRODUCTLINENAME, COALESCE(TRIM(c.PJ_FUNCTION), '(NA)') AS PJ_FUNCTION,
       COALESCE(TRIM(c.PJ_TYPE), '(NA)') AS PJ_TYPE, COALESCE(TRIM(c.PRODUCTNAME), '(NA)') AS PRODUCTNAME,
       COALESCE(TRIM(r.SPECNAME), '(NA)') AS SPECNAME, COALESCE(TRIM(r.LOSSREASONNAME), '(未填寫)') AS LOSSREASONNAME,
       COALESCE(TRIM(r.EQUIPMENTNAME), '(NA)') AS EQUIPMENTNAME, TRIM(r.REJECTCOMMENT) AS REJECTCOMMENT,
       {qty['REJECTQTY']} AS REJECT_QTY, {qty['STANDBYQTY']} AS STANDBY_QTY,
       {qty['QTYTOPROCESS']} AS QTYTOPROCESS_QTY, {qty['INPROCESSQTY']} AS INPROCESS_QTY,
       {qty['PROCESSEDQTY']} AS PROCESSED_QTY,
       {qty['REJECTQTY']} + {qty['STANDBYQTY']} + {qty['QTYTOPROCESS']} + {qty['INPROCESSQTY']}
         + {qty['PROCESSEDQTY']} AS REJECT_TOTAL_QTY,
       {qty['DEFECTQTY']} AS DEFECT_QTY, {d.ts('r.TXNDATE')} AS TXN_TIME, {d.ts('r.TXNDATE')} AS TXNDATE,
       {d.day('r.TXNDATE')} || ' 00:00:00' AS TXN_DAY
FROM wip_lots w
JOIN {t['DW_MES_LOTREJECTHISTORY']} r ON r.CONTAINERID = w.CONTAINERID AND TRIM(r.WORKCENTERNAME) = w.EQ_WORKCENTERNAME
LEFT JOIN {t['DW_MES_CONTAINER']} c ON c.CONTAINERID = r.CONTAINERID
LEFT JOIN spec_map sm ON sm.SPEC = TRIM(r.SPECNAME)"""
    if not n_groups:
        return sql
    # The original's WORKCENTER_FILTER: WORKCENTER_GROUP (the output column) IN the groups.
    ctes, select = sql.split("\n)\nSELECT r.CONTAINERID", 1)
    return (f"{ctes}\n), reject_data AS (\nSELECT r.CONTAINERID{select}\n)\nSELECT * FROM reject_data\n"
            f"WHERE {in_list('WORKCENTER_GROUP', n_groups, 'n')}")


_REJECT_COLUMNS = (
    ("CONTAINERID", "string"), ("CONTAINERNAME", "string"), ("WORKCENTERNAME", "string"),
    ("WORKCENTER_GROUP", "string"), ("WORKCENTERSEQUENCE_GROUP", "string"), ("PRODUCTLINENAME", "string"),
    ("PJ_FUNCTION", "string"), ("PJ_TYPE", "string"), ("PRODUCTNAME", "string"), ("SPECNAME", "string"),
    ("LOSSREASONNAME", "string"), ("EQUIPMENTNAME", "string"), ("REJECTCOMMENT", "string"),
    ("REJECT_QTY", "int64"), ("STANDBY_QTY", "int64"), ("QTYTOPROCESS_QTY", "int64"), ("INPROCESS_QTY", "int64"),
    ("PROCESSED_QTY", "int64"), ("REJECT_TOTAL_QTY", "int64"), ("DEFECT_QTY", "int64"),
    ("TXN_TIME", "timestamp"), ("TXNDATE", "timestamp"), ("TXN_DAY", "timestamp"))
REJECTS = Statement(
    sql=rejects_sql, columns=_REJECT_COLUMNS, ids="equipment_ids", split=False, narrow="workcenter_groups",
    order=(("TXN_DAY", True), ("WORKCENTERSEQUENCE_GROUP", False), ("WORKCENTERNAME", False),
           ("REJECT_TOTAL_QTY", True), ("CONTAINERNAME", False), ("TXNDATE", True)))

def materials_sql(d: Dialect, n_ids: int) -> str:
    return f"""
SELECT EQUIPMENTNAME, MATERIALPARTNAME, SUM(QTYCONSUMED) AS TOTAL_CONSUMED, COUNT(DISTINCT CONTAINERID) AS LOT_COUNT
FROM {d.tables['DW_MES_LOTMATERIALSHISTORY']}
WHERE TXNDATE >= {d.date_bind(':w0')} AND TXNDATE < {d.date_bind(':w1')} AND {in_list('EQUIPMENTNAME', n_ids)}
GROUP BY EQUIPMENTNAME, MATERIALPARTNAME"""


MATERIALS = Statement(
    sql=materials_sql, ids="equipment_names", split=False,
    columns=(("EQUIPMENTNAME", "string"), ("MATERIALPARTNAME", "string"), ("TOTAL_CONSUMED", "float64"),
             ("LOT_COUNT", "int64")),
    order=(("EQUIPMENTNAME", False), ("TOTAL_CONSUMED", True)))

#: The statuses whose hours the original sums, in its column order.
STATUSES = ("PRD", "SBY", "UDT", "SDT", "EGT", "NST")


def status_hours_sql(d: Dialect, n_ids: int) -> str:
    t = d.tables
    hours = {k: f"SUM(CASE WHEN s.NEWSTATUSNAME = '{k}' THEN s.HOURS ELSE 0 END)" for k in STATUSES}
    return f"""
SELECT r.RESOURCEID, r.RESOURCENAME,
       {", ".join(f"{hours[k]} AS {k}_HOURS" for k in STATUSES)},
       SUM(s.HOURS) AS TOTAL_HOURS,
       ROUND({hours['PRD']} * 100.0 /
             NULLIF(SUM(CASE WHEN s.NEWSTATUSNAME IN ('PRD', 'SBY', 'UDT') THEN s.HOURS ELSE 0 END), 0),
             2) AS OU_PERCENT
FROM {t['DW_MES_RESOURCESTATUS_SHIFT']} s
JOIN {t['DW_MES_RESOURCE']} r ON s.HISTORYID = r.RESOURCEID
WHERE s.TXNDATE >= {d.date_bind(':w0')} AND s.TXNDATE < {d.date_bind(':w1')} AND {in_list('r.RESOURCEID', n_ids)}
GROUP BY r.RESOURCEID, r.RESOURCENAME"""


def status_hours_post(rows: list[dict], params: dict) -> tuple[list[dict], dict]:
    """The original's ``totals``: each status's hours summed over the equipment, and the OU% of
    the sums (0 when PRD + SBY + UDT is 0)."""
    totals = {c: sum(r[c] or 0 for r in rows) for c in [f"{k}_HOURS" for k in STATUSES] + ["TOTAL_HOURS"]}
    denominator = totals["PRD_HOURS"] + totals["SBY_HOURS"] + totals["UDT_HOURS"]
    totals["OU_PERCENT"] = round(totals["PRD_HOURS"] * 100.0 / denominator, 2) if denominator > 0 else 0
    return rows, {"totals": totals}


def status_hours_stream_post(rows: Iterator[dict], params: dict) -> tuple[Iterator[dict], Callable[[], dict]]:
    """:func:`status_hours_post` as the rows go by: they pass unchanged, summed on the way."""
    columns = [f"{k}_HOURS" for k in STATUSES] + ["TOTAL_HOURS"]
    sums = dict.fromkeys(columns, 0)

    def passing() -> Iterator[dict]:
        for row in rows:
            for c in columns:
                sums[c] += row[c] or 0
            yield row

    def extra() -> dict:
        totals = dict(sums)
        denominator = totals["PRD_HOURS"] + totals["SBY_HOURS"] + totals["UDT_HOURS"]
        totals["OU_PERCENT"] = round(totals["PRD_HOURS"] * 100.0 / denominator, 2) if denominator > 0 else 0
        return {"totals": totals}

    return passing(), extra


STATUS_HOURS = Statement(
    sql=status_hours_sql, ids="equipment_ids", split=False, post=status_hours_post,
    stream_post=status_hours_stream_post,
    columns=(("RESOURCEID", "string"), ("RESOURCENAME", "string"))
    + tuple((f"{k}_HOURS", "float64") for k in STATUSES) + (("TOTAL_HOURS", "float64"), ("OU_PERCENT", "float64")),
    order=(("RESOURCENAME", False),))

EQUIPMENT_PERIOD = declare(QueryKind(
    kind="query-tool",
    params=(Day("start_date", missing="請指定日期範圍"),
            Day("end_date", missing="請指定日期範圍"),
            Choice("query_type", choices=QUERY_TYPES, missing="不支援的查詢類型: None",
                   invalid="不支援的查詢類型: {value!s:.40}"),
            Texts("equipment_ids", empty="請選擇至少一台設備"),
            Texts("equipment_names", empty="請選擇至少一台設備"),
            Texts("container_names"),
            Texts("workcenter_groups"),
            Int("page", default=1, minimum=1, maximum=1 << 31, lenient=True),
            Int("per_page", default=200, minimum=1, maximum=500, lenient=True)),
    statements={"status_hours": STATUS_HOURS, "jobs": JOBS, "lots": LOTS, "rejects": REJECTS,
                "materials": MATERIALS},
    selector="query_type", window_days=10, async_days=30, max_days=730,
    http=Http("/api/query-tool/equipment-period", bucket="query-tool-equipment", limit=(30, 60),
              title="The query-tool page's equipment-period query")))
