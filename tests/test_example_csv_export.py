"""The example CSV-export application: a second job kind that needed no change below it.

It runs through the real engine (a worker reading its queue, with the middleware stack its
module declares) and the real job layer, and its CSV equals the query's rows read
straight from SQLite.
"""

from __future__ import annotations

import csv
import io
import sqlite3

import pytest

from examples.csv_export import app
from tests.conftest_proc import run_until
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.worker import Worker
from tracebus.errors import InvalidParams
from tracebus.jobs.store import JobStore


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "export.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE lots (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        conn.executemany("INSERT INTO lots VALUES (?, ?, ?)",
                         [(i, f"lot-{i:05d}", (i * 37) % 1000) for i in range(2_345)])
    return str(path)


def test_an_export_runs_page_by_page_as_units_and_its_csv_equals_the_query(broker, settings, db):
    # Given a worker of this process reading the export queue with the declared middleware
    worker = Worker(broker, [app.QUEUE], WorkerSlot())
    worker.boot()
    store = JobStore(broker.client, settings)
    query = "SELECT id, name, qty FROM lots WHERE qty >= 100 ORDER BY id"
    # When an export of the query is submitted with 500 rows per page
    job_id = app.submit(broker, store, db, query, user="alice", page_rows=500)
    run_until(worker, lambda: store.status(job_id)["status"] == "completed", message="export done")
    # Then it ran as one unit per page, and the CSV is the query's rows with a header
    status = store.status(job_id)
    with sqlite3.connect(db) as conn:
        expected = [[str(v) for v in row] for row in conn.execute(query)]
    assert status["progress"]["units_total"] == -(-len(expected) // 500) > 1
    rows = list(csv.reader(io.StringIO("".join(app.csv_lines(store, job_id)))))
    assert rows[0] == ["id", "name", "qty"] and rows[1:] == expected
    # And every key the job wrote expires
    keys = list(broker.client.scan_iter(match=store.keys.job_scan(job_id)))
    assert keys and all(broker.client.ttl(k) > 0 for k in keys)


def test_an_export_of_something_other_than_a_select_is_refused(broker, settings, db):
    store = JobStore(broker.client, settings)
    for query in ("DELETE FROM lots", "SELECT 1; DROP TABLE lots", "SELECT nope FROM missing"):
        with pytest.raises(InvalidParams):
            app.submit(broker, store, db, query, user="alice")

