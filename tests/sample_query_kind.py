"""A declared query kind written as docs/porting.md says, in one file, for tests/test_query_kind_routes.py.

It is not registered on import (the suite's other tests list the declared kinds): the test
registers it with :func:`~tracebus.trace.query.declare`, as a module of tracebus/trace/query/ does.
"""

from __future__ import annotations

from tracebus.jobs.fields import Choice, Day
from tracebus.jobs.list_fields import Texts
from tracebus.trace.query import Http, QueryKind, Statement
from tracebus.trace.sources.queries import Dialect


def job_ids_sql(d: Dialect, n_ids: int) -> str:
    binds = ", ".join(f":p{i}" for i in range(n_ids))
    return f"""
SELECT JOBID, RESOURCEID, {d.ts('CREATEDATE')} AS CREATEDATE
FROM {d.tables['DW_MES_JOB']}
WHERE CREATEDATE >= {d.date_bind(':w0')} AND CREATEDATE < {d.date_bind(':w1')}
  AND RESOURCEID IN ({binds})
ORDER BY JOBID"""


SAMPLE = QueryKind(
    kind="sample-jobs",
    params=(Day("start_date", missing="dates, please"),
            Day("end_date", missing="dates, please"),
            Choice("query_type", choices=("job_ids",), missing="{name} is required"),
            Texts("equipment_ids", missing="equipment, please")),
    statements={"job_ids": Statement(job_ids_sql, (("JOBID", "string"), ("RESOURCEID", "string"),
                                                   ("CREATEDATE", "timestamp")),
                                     order=(("JOBID", False),), ids="equipment_ids")},
    selector="query_type", window_days=10, async_days=7, max_days=60,
    http=Http("/api/sample/job-ids", bucket="sample-jobs", limit=(2, 60), title="A sample kind's job ids"))
