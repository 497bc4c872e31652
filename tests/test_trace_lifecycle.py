"""Trace-job lifecycle with real workers on the scale-0.01 dataset: cancel (queued and
running), partial (one domain's table is missing from the database), retry after the
database is fixed (only the failed units run again), failed (every domain fails).

Failures are real: the workers read a copy of the sample database without one table (or an
empty database), so the source raises a permanent ``SourceError`` ("no such table").
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest

from tests.conftest_trace import (
    DOMAINS,
    assert_every_key_expires,
    assert_result,
    chunk_keys,
    direct,
    manifest_chunk_keys,
    queue_drained,
    request,
    start_workers,
    trace_service,
    units,
    wait_final,
)
from tests.helpers import ndjson_lines
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.errors import JobNotComplete, JobStateConflict
from tracebus.trace.synth import cids

HOLDS_TABLE = "DW_MES_HOLDRELEASEHISTORY"


@pytest.fixture
def trace(sample_db):
    return cids(sample_db)


@pytest.fixture
def without_holds(sample_db, tmp_path):
    """A copy of the sample database that lacks the holds domain's table."""
    path = tmp_path / "no-holds.db"
    shutil.copy(sample_db, path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"DROP TABLE {HOLDS_TABLE}")
    return path


def restore_holds(broken, sample_db) -> None:
    """Fix the database in place (the workers keep their connection): recreate the table and
    its index from the original and copy its rows."""
    conn = sqlite3.connect(broken, isolation_level=None)
    try:
        conn.execute("ATTACH DATABASE ? AS original", (str(sample_db),))
        ddl = [r[0] for r in conn.execute(
            "SELECT sql FROM original.sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
            "ORDER BY type = 'index'", (HOLDS_TABLE,))]
        conn.execute("BEGIN")
        for statement in ddl:
            conn.execute(statement)
        conn.execute(f"INSERT INTO main.{HOLDS_TABLE} SELECT * FROM original.{HOLDS_TABLE}")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_cancelling_a_queued_job_skips_all_its_units(supervisor, redis_client, sample_db, trace):
    svc, env = trace_service(sample_db, TRACE_CHUNK_CIDS="100")
    job = svc.submit(svc.parse(request(trace), "alice"))  # no worker yet
    assert svc.status(job)["state"] == "queued"

    cancelled = svc.cancel(job)
    assert cancelled["status"] == cancelled["state"] == "cancelled"
    with pytest.raises(JobStateConflict):
        svc.cancel(job)

    sup = start_workers(supervisor, svc, env)  # the units already sent reach the workers
    sup.wait(lambda: queue_drained(redis_client, svc), 10, "the sent units to be consumed")
    status = svc.status(job)
    assert status["state"] == "cancelled" and status["progress"]["units_done"] == 0
    assert {(u["state"], u["attempt"]) for u in units(svc, job)} == {("cancelled", 0)}
    assert chunk_keys(redis_client, svc.store.keys, job) == set()
    assert_every_key_expires(redis_client, svc, [job])


@ON_NODE_AND_CLUSTER
def test_cancelling_a_running_job_stops_it_and_keeps_what_was_done(supervisor, redis_client,
                                                                 sample_db, trace):
    svc, env = trace_service(sample_db, TRACE_CHUNK_CIDS="20", TRACE_STREAM_BATCH_SIZE="50")
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace), "alice"))
    sup.wait(lambda: svc.status(job)["progress"]["units_done"] >= 10, 20, "10 units done")

    svc.cancel(job)
    chunks, before = chunk_keys(redis_client, svc.store.keys, job), units(svc, job)
    sup.wait(lambda: queue_drained(redis_client, svc), 10, "the in-flight units to finish")

    status, after = svc.status(job), units(svc, job)
    assert status["status"] == status["state"] == "cancelled"
    done = [u for u in after if u["state"] == "done"]
    assert 10 <= len(done) < len(after) and status["progress"]["units_done"] == len(done)
    assert {u["state"] for u in after} == {"done", "cancelled"}
    assert after == before, "a unit changed after the cancel"
    # A unit in flight at the cancel stops at its next write: one whose write had passed its
    # fence just before the cancel may still store that chunk (never committed: no manifest
    # names it, and it expires with the job hash, result_write.lua); nothing more is written
    # after the cancel.
    late = chunk_keys(redis_client, svc.store.keys, job) - chunks
    in_flight = {u["unit"] for u in before if u["state"] == "cancelled" and u["started_at"] is not None}
    late_units = [int(re.search(r"\{[^}]*:(\d+):\d+\}", key).group(1)) for key in late]
    assert set(late_units) <= in_flight and len(late_units) == len(set(late_units)), \
        ("a chunk was written after the cancel", late)
    assert not late & manifest_chunk_keys(redis_client, svc, job)
    assert chunks - chunk_keys(redis_client, svc.store.keys, job) == set(), "a chunk done before the cancel went"
    with pytest.raises((JobNotComplete, JobStateConflict)):  # a cancelled domain is not readable
        svc.page(job, DOMAINS[-1], 0, 10, False)
    assert_every_key_expires(redis_client, svc, [job])


@ON_NODE_AND_CLUSTER
def test_a_missing_table_gives_partial_and_retry_reruns_only_the_failed_units(
        supervisor, redis_client, sample_db, without_holds, trace):
    trace = trace[:600]  # three units a domain (chunks of 200), three of them failed; more prove nothing more
    svc, env = trace_service(without_holds, TRACE_CHUNK_CIDS="200")
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace), "alice"))

    status = wait_final(sup, svc, job, 30)
    assert status["status"] == "completed" and status["state"] == "partial", status
    assert status["code"] == "EVENTS_PARTIAL_FAILURE" and status["failed_domains"] == ["holds"]
    assert "no such table" in status["error"]
    first = units(svc, job)
    failed = {u["unit"] for u in first if u["state"] == "failed"}
    assert failed and {first[u]["domain"] for u in failed} == {"holds"}
    assert all(u["attempt"] == 1 and "no such table" in u["error"] for u in first if u["unit"] in failed)
    assert {u["state"] for u in first if u["unit"] not in failed} == {"done"}
    expected = direct(sample_db, trace)
    others = [d for d in DOMAINS if d != "holds"]
    assert_result(svc, job, expected, only=others)
    with pytest.raises((JobNotComplete, JobStateConflict)):
        svc.page(job, "holds", 0, 10, False)
    lines = [json.loads(line) for line in ndjson_lines(svc.stream(job))]
    assert lines[-2] == {"type": "warning", "code": "EVENTS_PARTIAL_FAILURE", "failed_domains": ["holds"]}
    assert lines[-1] == {"type": "complete", "total_records": sum(sum(expected[d].values()) for d in others)}
    assert_every_key_expires(redis_client, svc, [job])

    restore_holds(without_holds, sample_db)
    assert svc.retry(job)["state"] in ("queued", "running", "completed")
    status = wait_final(sup, svc, job, 30)

    assert status["status"] == status["state"] == "completed", status
    assert status["failed_domains"] == [] and "code" not in status and status["error"] is None
    again = units(svc, job)
    assert all(u["attempt"] == (2 if u["unit"] in failed else 1) for u in again), "a done unit re-ran"
    assert all(u["state"] == "done" and u["error"] is None for u in again)
    assert_result(svc, job, expected)
    records = sum(line["count"] for line in map(json.loads, ndjson_lines(svc.stream(job))) if line["type"] == "records")
    assert records == status["progress"]["rows"] == sum(sum(c.values()) for c in expected.values())
    assert_every_key_expires(redis_client, svc, [job])


def test_every_domain_failing_fails_the_job(supervisor, redis_client, tmp_path, trace):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # a database without any table
    svc, env = trace_service(empty, TRACE_CHUNK_CIDS="400")
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace), "alice"))

    status = wait_final(sup, svc, job, 30)
    assert status["status"] == status["state"] == "failed", status
    assert status["failed_domains"] == DOMAINS and "code" not in status
    assert "no such table" in status["error"]
    assert {(u["state"], u["attempt"]) for u in units(svc, job)} == {("failed", 1)}
    n_units = -(-len(trace) // 400) * len(DOMAINS)
    assert status["progress"]["units_failed"] == status["progress"]["units_total"] == n_units
    assert chunk_keys(redis_client, svc.store.keys, job) == set()
    assert_every_key_expires(redis_client, svc, [job])
