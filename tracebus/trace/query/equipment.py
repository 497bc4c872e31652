"""The query-tool equipment-period job, ported from the original as the worked example.

The original: ``POST /api/query-tool/equipment-period`` (routes/query_tool_routes.py) with
``{equipment_ids, equipment_names, start_date, end_date, query_type}``; a span of 30 days or
more is an RQ job of prefix ``query-tool`` (202 ``{async, job_id, status_url, result_url}``,
polled through ``/api/job/<id>?prefix=query-tool``), a shorter one is answered at once; the
page (query-tool/composables/useEquipmentQuery.ts) reads ``data`` of either answer.

Ported statements (the original's SQL files, on the real DWH tables):

* ``jobs``: sql/query_tool/equipment_jobs.sql, the JOB records of the equipment (DW_MES_JOB,
  ``RESOURCEID`` = EQUIPMENTID) created in the window, by RESOURCENAME then newest first.

Not ported yet (answered 400 naming what is): ``status_hours``, ``lots``, ``materials``,
``rejects``; docs/porting.md says how.
"""

from __future__ import annotations

from tracebus.trace.query import Param, QueryKind, Statement, declare
from tracebus.trace.sources.queries import Dialect

#: The original's query types, and those ported.
QUERY_TYPES = ("status_hours", "lots", "materials", "rejects", "jobs")
PORTED = ("jobs",)


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

EQUIPMENT_PERIOD = declare(QueryKind(
    kind="query-tool",
    params=(Param("start_date", "date", message="請指定日期範圍"),
            Param("end_date", "date", message="請指定日期範圍"),
            Param("query_type", "choice", choices=QUERY_TYPES, message="不支援的查詢類型: None"),
            Param("equipment_ids", "ids", message="請選擇至少一台設備"),
            Param("equipment_names", "texts", required=False)),
    statements={"jobs": JOBS}, selector="query_type", window_days=10, async_days=30, max_days=730))
