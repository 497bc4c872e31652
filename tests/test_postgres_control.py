"""Control of the PostgreSQL source's statements from real workers (issue 35), read where a DBA
reads it: pg_stat_activity on the suite's own server.

A unit's statement (tests/kind_sql.py, ``spin``) reads a table that a second session of the
test keeps locked (ACCESS EXCLUSIVE), so it stays ``active`` exactly as long as the test needs.
Each path must end it on the server within its bound: the job's cancel (through the store, and
through POST /api/v1/jobs/{id}/cancel and the generic abandon route), the job's time limit
and the unit's time limit within 2 s, the worker's death (SIGKILL) within 10 s. Also: the
sessions say what they serve, the server-side statement limit fails the unit once, and the
session cap holds across 4 worker processes of 2 supervisors sharing one Redis; the statement of
a frozen worker (SIGSTOP) is ended by the attempt that takes its unit over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import psutil
import psycopg
import pytest

from tests import kind_sql
from tests.conftest_trace import trace_service
from tests.helpers import wait_for

MODULES = ("tracebus.trace.tasks", "tests.kind_sql")
DATABASE = "control"


def prepare(server) -> str:
    """The DSN of ``server``'s database holding the table the tests lock (the units need no other)."""
    dsn = server.database(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {kind_sql.LOCKED_TABLE} (x int)")
        if conn.execute(f"SELECT count(*) FROM {kind_sql.LOCKED_TABLE}").fetchone()[0] == 0:
            conn.execute(f"INSERT INTO {kind_sql.LOCKED_TABLE} VALUES (1)")
    return dsn


@pytest.fixture(scope="module")
def control_dsn(postgres_server) -> str:
    return prepare(postgres_server)


@pytest.fixture
def admin(control_dsn):
    with psycopg.connect(control_dsn, autocommit=True) as conn:
        yield conn


class Lock:
    """The locked table: ``hold()`` in a session of its own, ``release()``."""

    def __init__(self, dsn: str):
        self.dsn, self.conn = dsn, None

    def hold(self) -> "Lock":
        self.conn = psycopg.connect(self.dsn)
        self.conn.execute(f"LOCK TABLE {kind_sql.LOCKED_TABLE} IN ACCESS EXCLUSIVE MODE")
        return self

    def release(self) -> None:
        if self.conn is not None:
            self.conn.rollback()
            self.conn.close()
            self.conn = None


@pytest.fixture
def lock(control_dsn):
    held = Lock(control_dsn).hold()
    yield held
    held.release()


@pytest.fixture
def workers(supervisor, sample_db, control_dsn):
    def start(processes: int = 2, **env):
        svc, worker_env = trace_service(sample_db, TRACEBUS_SOURCE="postgres", TRACEBUS_POSTGRES_DSN=control_dsn,
                                        **env)
        sup = supervisor("--queues", svc.settings.queue, processes=processes, modules=MODULES, **worker_env)
        return sup, svc
    return start


def statements(admin, job_id: str | None = None) -> list[tuple]:
    """(pid, state, application_name) of tracebus's statements now (of one job, when given)."""
    pattern = f"tracebus {job_id} %" if job_id else "tracebus %"
    return admin.execute("SELECT pid, state, application_name FROM pg_stat_activity "
                         "WHERE application_name LIKE %s AND pid <> pg_backend_pid() AND state = 'active'",
                         [pattern]).fetchall()


def running(sup, admin, job_id: str) -> tuple:
    """Wait for the job's ``spin`` statement to be active on the server, waiting on the lock
    (not the session's naming statement just before it); its (pid, state, application_name,
    query_start): the start is read here, before the test acts, because a cancelled session may
    be closed (and gone from pg_stat_activity) before the test looks again."""
    def blocked():
        return admin.execute("SELECT pid, state, application_name, query_start FROM pg_stat_activity "
                             "WHERE application_name LIKE %s AND state = 'active' AND wait_event_type = 'Lock'",
                             [f"tracebus {job_id} %"]).fetchone()
    return sup.wait(blocked, 20, f"{job_id}'s statement")


def ended_after(admin, statement: tuple, since: float, timeout_s: float = 15) -> float:
    """Seconds from ``since`` (time.monotonic) until the statement :func:`running` found
    (``statement``) no longer runs (its backend idle, gone, or running another one)."""
    pid, started = statement[0], statement[3]

    def over():
        row = admin.execute("SELECT state, query_start FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
        return row is None or row[0] != "active" or row[1] != started
    wait_for(over, timeout_s, interval_s=0.02, message=f"backend {pid}'s statement to end")
    return time.monotonic() - since


def test_a_statement_names_its_job_unit_and_user_and_a_cancel_stops_it_within_2_s(workers, admin, lock):
    sup, svc = workers(processes=1)
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"], user="ann")
    statement = running(sup, admin, job_id)
    pid, _, name, _ = statement
    assert name == f"tracebus {job_id} 0 #1 ann"
    svc.store.cancel(job_id)
    assert ended_after(admin, statement, time.monotonic()) < 2.0
    error = sup.wait(lambda: kind_sql_marks(svc, job_id).get("error"), 10, "the unit's error")
    assert "statement cancelled on the server: the job was cancelled" in error
    # The session went back to the pool under its idle name (or was closed).
    names = {r[0] for r in admin.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                                         [pid]).fetchall()}
    assert names <= {"tracebus"}


def test_the_jobs_time_limit_stops_its_statement_within_2_s(workers, admin, lock):
    sup, svc = workers(processes=1, TRACE_JOB_TIMEOUT_SECONDS="3")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    statement = running(sup, admin, job_id)
    pid, _, _, _ = statement
    created_ms = int(svc.store.redis.hget(svc.store.keys.job(job_id), "created_ms"))
    limit_at = time.monotonic() - (time.time() - (created_ms / 1000 + 3))
    assert ended_after(admin, statement, limit_at) < 2.0
    doc = svc.store.status(job_id)
    assert doc["status"] == "failed" and "TRACE_JOB_TIMEOUT_SECONDS (3 s)" in doc["error"], doc


def test_a_units_time_limit_stops_its_statement_within_2_s(workers, admin, lock):
    sup, svc = workers(processes=1, TEST_SQL_UNIT_LIMIT_MS="1500")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    statement = running(sup, admin, job_id)
    pid, _, _, _ = statement
    started = float(kind_sql_marks(svc, job_id)["started"])
    limit_at = time.monotonic() - (time.time() - (started + 1.5))
    assert ended_after(admin, statement, limit_at) < 2.0
    svc.store.cancel(job_id)


def test_a_killed_workers_statement_ends_within_10_s(workers, admin, lock):
    sup, svc = workers(processes=1)
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    statement = running(sup, admin, job_id)
    pid, _, _, _ = statement
    os.kill(worker_of(sup, admin, pid), signal.SIGKILL)
    assert ended_after(admin, statement, time.monotonic()) < 10.0
    svc.store.cancel(job_id)  # the unit runs again on the respawned worker; stop it


def worker_of(sup, admin, pid: int) -> int:
    """The worker process whose connection backend ``pid`` serves."""
    port = admin.execute("SELECT client_port FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]
    return next(w for w in sup.workers()
                if any(c.laddr and c.laddr.port == port for c in psutil.Process(w).net_connections("tcp")))


def test_a_frozen_workers_statement_is_ended_by_the_attempt_that_takes_its_unit_over(workers, admin, lock):
    sup, svc = workers(processes=2)
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    statement = running(sup, admin, job_id)
    pid, _, name, _ = statement
    assert name.startswith(f"tracebus {job_id} 0 #1 ")
    frozen = worker_of(sup, admin, pid)
    os.kill(frozen, signal.SIGSTOP)  # its socket stays open: only the next attempt can tell
    try:
        since = time.monotonic()
        assert ended_after(admin, statement, since) < 8.0
        assert psutil.Process(frozen).status() == psutil.STATUS_STOPPED  # not the supervisor's kill
        _, _, name, _ = running(sup, admin, job_id)
        assert name.startswith(f"tracebus {job_id} 0 #2 ")
    finally:
        with contextlib.suppress(ProcessLookupError):  # the supervisor may have killed it by now
            os.kill(frozen, signal.SIGCONT)
    svc.store.cancel(job_id)


def test_the_statement_limit_fails_the_unit_once_naming_it(workers, admin, lock):
    sup, svc = workers(processes=1, TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S="1")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick"])
    doc = sup.wait(lambda: (d := svc.store.status(job_id))["status"] in ("partial", "failed", "completed") and d,
                   30, "the job to end")
    assert doc["status"] in ("partial", "failed"), doc
    units = {u["unit"]: u for u in svc.store.detail(job_id)["units"]}
    assert units[0]["state"] == "failed" and units[0]["attempt"] == 1, units[0]
    assert "TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S (1 s)" in units[0]["error"]
    assert units[1]["state"] == "done" and units[1]["rows"] == 1


def test_the_cap_holds_across_two_supervisors_and_four_workers(workers, control_dsn, admin, lock):
    cap = {"TRACEBUS_SOURCE_MAX_SESSIONS": "3"}
    sup, svc = workers(processes=2, **cap)
    workers(processes=2, **cap)  # a second supervisor on the same Redis and queue
    # Five users' jobs: one user's would share two places in the queue (TRACE_USER_MAX_INFLIGHT_UNITS)
    jobs = [kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "spin"], user=f"ctl-user-{n}")
            for n in range(5)]
    pool = places(svc, 3)
    with Sampler(control_dsn) as sampler:
        sup.wait(lambda: len(statements(admin)) == 3 and pool.usage().waiting == 1, 30,
                 "three statements running and the fourth worker's unit waiting")
        served = set()
        while len(served) < len(jobs):
            # One job less: a waiting unit takes its place, and a worker the next unit.
            job_id = sup.wait(lambda: next((name.split()[1] for _, _, name in statements(admin)
                                            if name.split()[1] not in served), None), 20, "a job not yet served")
            served.add(job_id)
            svc.store.cancel(job_id)
            if len(served) < len(jobs) - 1:
                sup.wait(lambda: len(statements(admin)) == 3 and job_id not in {r[2].split()[1] for r in
                                                                               statements(admin)},
                         20, "the place to go to another job")
            else:
                sup.wait(lambda: len(statements(admin)) <= 2, 20, "the last jobs' statements")
        for job_id in jobs:
            if job_id not in served:
                svc.store.cancel(job_id)
        sup.wait(lambda: not statements(admin), 20, "every statement to end")
    assert sampler.samples > 20 and sampler.most == 3, (sampler.samples, sampler.most)
    sup.wait(lambda: pool.usage().in_use == 0 and pool.usage().waiting == 0, 20, "every place back")


def places(svc, capacity: int):
    from tracebus.jobs.keys import JobKeys
    from tracebus.jobs.places import Places
    from tracebus.trace.sources.control import POOL
    return Places(svc.store.redis, JobKeys(svc.settings.key_prefix), POOL, capacity)


class Sampler:
    """Counts tracebus's active statements in pg_stat_activity from a thread of its own."""

    def __init__(self, dsn: str):
        self.dsn, self.samples, self.most = dsn, 0, 0
        self._stop = threading.Event()

    def __enter__(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.wait(0.01):
                self.most = max(self.most, len(statements(conn)))
                self.samples += 1

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def kind_sql_marks(svc, job_id: str, unit: int = 0) -> dict[str, str]:
    raw = svc.store.redis.hgetall(kind_sql.marks_key(svc.settings.key_prefix, job_id, unit))
    return {k.decode(): v.decode() for k, v in raw.items()}


def test_the_cancel_and_abandon_routes_stop_the_statement_within_2_s(workers, admin, lock):
    from falcon import testing

    from api.app import create_app

    sup, svc = workers(processes=2)
    settings = svc.settings.replace(trusted_proxies="127.0.0.1", rate_limits="off")
    client = testing.TestClient(create_app(settings, sup.broker), headers={settings.user_header: "ann"})
    routes = [lambda job_id: client.simulate_post(f"/api/v1/jobs/{job_id}/cancel"),
              lambda job_id: client.simulate_post(f"/api/job/{job_id}/abandon", json={"prefix": "test-sql"})]
    for route in routes:
        job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"], user="ann")
        statement = running(sup, admin, job_id)
        pid, _, _, _ = statement
        since = time.monotonic()
        resp = route(job_id)
        assert resp.status_code == 200, resp.text
        assert ended_after(admin, statement, since) < 2.0
