"""The CSV-export job kind: submit a query, run its pages as units, stream the CSV.

A job's app fields carry the database path, the query and the page size; unit ``u``
runs ``SELECT * FROM (<query>) LIMIT page_size OFFSET u * page_size`` on a read-only
SQLite connection and stores the rows in fenced chunks. :func:`csv_lines` reads them back
in page order, one chunk at a time.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from typing import Iterator

from tracebus.engine.broker import Broker
from tracebus.errors import InvalidParams
from tracebus.jobs.actor import unit_actor
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.runner import UnitContext
from tracebus.jobs.spec import JobSpec, fingerprint_of
from tracebus.jobs.store import JobStore

KIND = "csv-export"
QUEUE = "csv-export"
SECTION = "rows"


def submit(broker: Broker, store: JobStore, db_path: str, query: str, user: str,
           page_rows: int = 1000) -> str:
    """Admit an export of ``query`` over the SQLite database at ``db_path`` and start it.

    Raises:
        InvalidParams: the query is not a single SELECT the database accepts.
    """
    if not query.lstrip().lower().startswith("select") or ";" in query.strip().rstrip(";"):
        raise InvalidParams("query must be one SELECT statement")
    if page_rows < 1:
        raise InvalidParams("page_rows must be >= 1")
    with _connect(db_path) as db:
        try:
            total = db.execute(f"SELECT COUNT(*) FROM ({query})").fetchone()[0]
        except sqlite3.Error as e:
            raise InvalidParams(f"query failed: {e}") from None
    pages = list(range(max(1, -(-total // page_rows))))
    spec = JobSpec(kind=KIND, user=user, sections=(SECTION,), items=pages, chunk_items=1, queue=QUEUE,
                   actor_name="csv_export_page", fingerprint=fingerprint_of(db_path, query, page_rows, user),
                   app={"db": db_path, "query": query, "page_rows": page_rows})
    job_id = store.create(spec)
    Dispatcher(broker, store).start(job_id)
    return job_id


@unit_actor("csv_export_page", queue=QUEUE, max_retries=2, min_backoff_ms=500)
def export_page(ctx: UnitContext) -> None:
    """Run one page of the job's query into the unit's chunks."""
    app = ctx.store.status(ctx.job_id)["app"]
    [page] = ctx.input
    with _connect(app["db"]) as db:
        cursor = db.execute(f"SELECT * FROM ({app['query']}) LIMIT ? OFFSET ?",
                            (app["page_rows"], page * app["page_rows"]))
        columns = [d[0] for d in cursor.description]
        while rows := cursor.fetchmany(500):
            ctx.write(columns, [list(r) for r in rows])


def csv_lines(store: JobStore, job_id: str) -> Iterator[str]:
    """The finished export as CSV text, header first, one stored chunk at a time.

    Raises:
        JobNotComplete: the export is still running (or failed).
    """
    layout = store.layouts(job_id, [SECTION])[SECTION]
    header_written = False
    for columns, rows in store.iter_chunks(job_id, SECTION, layout):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if not header_written:
            writer.writerow(columns)
            header_written = True
        writer.writerows(rows)
        yield out.getvalue()


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
