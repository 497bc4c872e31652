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
  the page ``page``/``per_page`` (200 by default, at most 500) with its ``pagination``.

Not ported yet (answered 400 naming what is): ``status_hours`` (its tables are not in the
sample), ``materials``, ``rejects``, and ``lots`` narrowed by ``container_names``;
docs/porting.md says how.
"""

from __future__ import annotations

from tracebus.trace.query import Param, QueryKind, Statement, declare, order_rows
from tracebus.trace.sources.queries import Dialect

#: The original's query types, and those ported.
QUERY_TYPES = ("status_hours", "lots", "materials", "rejects", "jobs")
PORTED = ("jobs", "lots")


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

def lots_sql(d: Dialect, n_ids: int) -> str:
    binds = ", ".join(f":p{i}" for i in range(n_ids))
    return f"""
SELECT h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTID, h.EQUIPMENTNAME, h.SPECNAME,
       {d.ts('h.TRACKINTIMESTAMP')} AS TRACKINTIMESTAMP, {d.ts('h.TRACKOUTTIMESTAMP')} AS TRACKOUTTIMESTAMP,
       h.TRACKINQTY, h.TRACKOUTQTY, h.FINISHEDRUNCARD, h.PJ_WORKORDER, TRIM(c.CONTAINERNAME) AS CONTAINERNAME,
       c.PJ_TYPE, c.PJ_BOP, c.FIRSTNAME AS WAFER_LOT_ID, TRIM(c.PRODUCTLINENAME) AS PRODUCTLINENAME
FROM {d.tables['DW_MES_LOTWIPHISTORY']} h
LEFT JOIN {d.tables['DW_MES_CONTAINER']} c ON h.CONTAINERID = c.CONTAINERID
WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':w0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':w1')}
  AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL
  AND h.EQUIPMENTID IN ({binds})
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


LOTS = Statement(
    sql=lots_sql,
    columns=(("CONTAINERID", "string"), ("WORKCENTERNAME", "string"), ("EQUIPMENTID", "string"),
             ("EQUIPMENTNAME", "string"), ("SPECNAME", "string"), ("TRACKINTIMESTAMP", "timestamp"),
             ("TRACKOUTTIMESTAMP", "timestamp"), ("TRACKINQTY", "int64"), ("TRACKOUTQTY", "int64"),
             ("FINISHEDRUNCARD", "string"), ("PJ_WORKORDER", "string"), ("CONTAINERNAME", "string"),
             ("PJ_TYPE", "string"), ("PJ_BOP", "string"), ("WAFER_LOT_ID", "string"), ("PRODUCTLINENAME", "string")),
    order=(("EQUIPMENTNAME", False), ("TRACKINTIMESTAMP", False)), ids="equipment_ids", post=lots_post,
    unported=("container_names",))

EQUIPMENT_PERIOD = declare(QueryKind(
    kind="query-tool",
    params=(Param("start_date", "date", message="請指定日期範圍"),
            Param("end_date", "date", message="請指定日期範圍"),
            Param("query_type", "choice", choices=QUERY_TYPES, message="不支援的查詢類型: None"),
            Param("equipment_ids", "ids", message="請選擇至少一台設備"),
            Param("equipment_names", "texts", required=False),
            Param("container_names", "texts", required=False),
            Param("page", "int", required=False, default=1, minimum=1, maximum=1 << 31),
            Param("per_page", "int", required=False, default=200, minimum=1, maximum=500)),
    statements={"jobs": JOBS, "lots": LOTS}, selector="query_type", window_days=10, async_days=30, max_days=730))
