"""The PostgreSQL server's faults under running jobs (issue 35, item 5), with real workers.

A session killed by the server mid-unit (pg_terminate_backend) and a server restarted mid-job:
the unit is retried and the job completes with every row. A server refusing connections: the
units back off and retry, /readyz names ``source``, and the job completes once the server is
back. A frozen server (SIGSTOP: TCP still answers, PostgreSQL does not) is found within
TRACEBUS_SOURCE_DEAD_PEER_S and the worker goes on; a cancel it never answers frees the worker
by cutting the statement's connection. The restarts and the freeze happen on a
server of this module's own, not the suite's.
"""

from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest
from falcon import testing

from api.app import create_app
from tests import kind_sql
from tests.conftest_trace import trace_service
from tests.test_postgres_control import DATABASE, MODULES, Lock, kind_sql_marks, running, statements
from tracebus.pg_proc import PostgresServer

FINAL = ("completed", "partial", "failed", "cancelled")


@pytest.fixture(scope="module")
def own_server():
    try:
        server = PostgresServer().start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    if server.process is not None and server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGCONT)
    server.stop()


def prepare(server) -> str:
    dsn = server.database(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {kind_sql.LOCKED_TABLE} (x int)")
        if conn.execute(f"SELECT count(*) FROM {kind_sql.LOCKED_TABLE}").fetchone()[0] == 0:
            conn.execute(f"INSERT INTO {kind_sql.LOCKED_TABLE} VALUES (1)")
    return dsn


@pytest.fixture
def start(supervisor, sample_db):
    def run(dsn: str, processes: int = 1, **env):
        svc, worker_env = trace_service(sample_db, TRACEBUS_SOURCE="postgres", TRACEBUS_POSTGRES_DSN=dsn, **env)
        sup = supervisor("--queues", svc.settings.queue, processes=processes, modules=MODULES, **worker_env)
        return sup, svc
    return run


def final(sup, svc, job_id: str, timeout_s: float) -> dict:
    return sup.wait(lambda: (d := svc.store.status(job_id))["status"] in FINAL and d, timeout_s, f"{job_id} to end")


def restart(server: PostgresServer) -> None:
    server.process.send_signal(signal.SIGINT)  # a fast shutdown: every session is terminated
    server.process.wait(timeout=30)
    server.start()


def test_a_session_the_server_kills_mid_unit_is_retried_and_the_job_completes(start, postgres_server):
    dsn = prepare(postgres_server)
    lock = Lock(dsn).hold()
    try:
        sup, svc = start(dsn)
        job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick"])
        with psycopg.connect(dsn, autocommit=True) as admin:
            pid, _, _ = running(sup, admin, job_id)
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            sup.wait(lambda: (rows := statements(admin, job_id)) and rows[0][0] != pid, 30, "the unit's retry")
    finally:
        lock.release()
    doc = final(sup, svc, job_id, 30)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 2, doc
    units = {u["unit"]: u for u in svc.store.detail(job_id)["units"]}
    assert units[0]["attempt"] >= 2


def test_a_server_restarted_mid_job_the_job_completes_with_every_row(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn)
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick", "quick"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    restarted_at = time.monotonic()
    restart(own_server)  # takes the lock with it
    lock.conn = None
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 3, doc
    assert time.monotonic() - restarted_at < 60


def test_a_server_refusing_connections_units_back_off_readyz_names_the_source_and_the_job_completes(
        start, own_server):
    dsn = prepare(own_server)
    sup, svc = start(dsn)
    own_server.process.send_signal(signal.SIGINT)
    own_server.process.wait(timeout=30)
    try:
        job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["quick"])
        ready = testing.TestClient(create_app(svc.settings.replace(rate_limits="off"), sup.broker)).simulate_get(
            "/readyz")
        assert ready.status_code == 503 and "source" in ready.json["missing"], ready.json
        assert ready.json["source"].startswith("unreachable: postgres:")
        assert own_server.password not in ready.text
        sup.wait(lambda: "refused" in (kind_sql_marks(svc, job_id).get("error") or "").lower()
                 or "connect" in (kind_sql_marks(svc, job_id).get("error") or "").lower(), 20,
                 "a refused attempt")
        assert svc.store.status(job_id)["status"] in ("queued", "running")  # backing off, not failed
    finally:
        own_server.start()
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 1, doc
    units = svc.store.detail(job_id)["units"]
    assert units[0]["attempt"] >= 2
    ready = testing.TestClient(create_app(svc.settings.replace(rate_limits="off"), sup.broker)).simulate_get("/readyz")
    assert ready.json["source"] == "ok", ready.json


def test_a_frozen_server_is_found_within_the_dead_peer_limit_and_the_worker_goes_on(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn, TRACEBUS_SOURCE_DEAD_PEER_S="4")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    frozen_at = time.time()
    os.killpg(own_server.process.pid, signal.SIGSTOP)
    try:
        error = sup.wait(lambda: kind_sql_marks(svc, job_id).get("error"), 20, "the frozen server to be found")
        found_after = float(kind_sql_marks(svc, job_id)["ended"]) - frozen_at
    finally:
        os.killpg(own_server.process.pid, signal.SIGCONT)
    assert "TRACEBUS_SOURCE_DEAD_PEER_S" in error, error
    assert found_after < 4 + 2.0, found_after
    lock.release()
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 1, doc


def test_a_cancel_the_frozen_server_ignores_frees_the_worker_by_cutting_the_connection(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn, TRACEBUS_SOURCE_DEAD_PEER_S="120")  # the probe would not look for minutes
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    os.killpg(own_server.process.pid, signal.SIGSTOP)
    try:
        cancelled_at = time.time()
        svc.store.cancel(job_id)
        ended = float(sup.wait(lambda: kind_sql_marks(svc, job_id).get("ended"), 30, "the unit to let go"))
    finally:
        os.killpg(own_server.process.pid, signal.SIGCONT)
        lock.release()
    # The cancel request waits out its 2 s (CANCEL_TIMEOUT_S), then the statement gets 5 s more
    # (SEVER_AFTER_S) before the cut.
    assert ended - cancelled_at < 2 + 5 + 3, ended - cancelled_at
    assert "the job was cancelled" in kind_sql_marks(svc, job_id)["error"]
