"""Control of the source's statements from real workers, on the SQLite source (issue 35): the
cancel of a job, its time limit and a unit's time limit stop the statement running in the
worker (``interrupt()``, SQLite's cancel) within 2 s; the server-side statement limit fails a
unit once with a reason naming it; the session cap holds across the worker processes and a
unit waiting for a place holds none. The same paths on PostgreSQL, measured in
pg_stat_activity, are tests/test_postgres_control.py's.
"""

from __future__ import annotations

import json
import time

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from tests import kind_sql
from tests.clitools import run_cli
from tracebus.engine.broker import Broker
from tests.conftest_trace import trace_service
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.places import Places
from tracebus.trace.sources.control import POOL

MODULES = ("tracebus.trace.tasks", "tests.kind_sql")


def marks(svc, job_id: str, unit: int = 0) -> dict[str, str]:
    raw = svc.store.redis.hgetall(kind_sql.marks_key(svc.settings.key_prefix, job_id, unit))
    return {k.decode(): v.decode() for k, v in raw.items()}


def started(sup, svc, job_id: str, unit: int = 0) -> float:
    return float(sup.wait(lambda: marks(svc, job_id, unit).get("started"), 20, f"{job_id} unit {unit} to start"))


def ended(sup, svc, job_id: str, unit: int = 0, timeout_s: float = 10) -> float:
    return float(sup.wait(lambda: marks(svc, job_id, unit).get("ended"), timeout_s, f"{job_id} unit {unit} to end"))


def places(svc, capacity: int = 1) -> Places:
    return Places(svc.store.redis, JobKeys(svc.settings.key_prefix), POOL, capacity)


@pytest.fixture
def workers(supervisor, sample_db):
    def start(processes: int = 2, **env):
        svc, worker_env = trace_service(sample_db, **env)
        sup = supervisor("--queues", svc.settings.queue, processes=processes, modules=MODULES,
                         **{**worker_env, **env})
        return sup, svc
    return start


def test_a_cancel_stops_the_statement_and_the_cap_keeps_the_second_unit_waiting_without_a_session(workers):
    sup, svc = workers(processes=2, TRACEBUS_SOURCE_MAX_SESSIONS="1")
    first = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    started(sup, svc, first)
    second = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    pool = places(svc)
    sup.wait(lambda: pool.usage().waiting == 1, 20, "the second unit to wait for a place")
    assert pool.usage().in_use == 1
    assert_shown(sup, svc, in_use=1, waiting=1, cap=1)
    assert "started" in marks(svc, second)  # its unit runs: it waits inside execute(), with no session
    svc.store.cancel(first)
    cancelled_at = time.time()
    assert ended(sup, svc, first) - cancelled_at < 2.0
    assert "statement cancelled on the server: the job was cancelled" in marks(svc, first)["error"]
    sup.wait(lambda: pool.usage().waiting == 0 and pool.usage().in_use == 1, 10, "the place to pass on")
    svc.store.cancel(second)
    cancelled_at = time.time()
    assert ended(sup, svc, second) - cancelled_at < 2.0
    sup.wait(lambda: pool.usage().in_use == 0, 10, "the place to come back")


def test_the_statement_limit_fails_the_unit_once_naming_it(workers):
    sup, svc = workers(processes=1, TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S="1")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick"])
    doc = sup.wait(lambda: (d := svc.store.status(job_id))["status"] in ("partial", "failed", "completed") and d,
                   30, "the job to end")
    assert doc["status"] in ("partial", "failed"), doc  # one section: its units decide
    units = {u["unit"]: u for u in svc.store.detail(job_id)["units"]}
    assert units[0]["state"] == "failed" and units[0]["attempt"] == 1, units[0]
    assert "TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S (1 s)" in units[0]["error"]
    assert units[1]["state"] == "done"


def test_the_job_time_limit_stops_the_statement(workers):
    sup, svc = workers(processes=1, TRACE_JOB_TIMEOUT_SECONDS="3")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    started(sup, svc, job_id)
    created_s = int(svc.store.redis.hget(svc.store.keys.job(job_id), "created_ms")) / 1000
    assert ended(sup, svc, job_id, timeout_s=15) - (created_s + 3) < 2.0
    doc = svc.store.status(job_id)
    assert doc["status"] == "failed" and "TRACE_JOB_TIMEOUT_SECONDS (3 s)" in doc["error"], doc


def test_a_units_time_limit_stops_the_statement(workers):
    sup, svc = workers(processes=1, TEST_SQL_UNIT_LIMIT_MS="1500")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    begun = started(sup, svc, job_id)
    assert ended(sup, svc, job_id) - (begun + 1.5) < 2.0
    assert "time limit" in marks(svc, job_id)["error"]
    svc.store.cancel(job_id)


def assert_shown(sup, svc, in_use: int, waiting: int, cap: int) -> None:
    """``tracebus status``, the monitor's /api/v1/queues and /metrics show the source's sessions."""
    # The reader's own setting is the default (8): the cap shown is the one the workers take places under.
    env = {"REDIS_URL": svc.settings.redis_url, "TRACEBUS_KEY_PREFIX": svc.settings.key_prefix}
    status = run_cli("status", "--json", env=env)
    assert status.code == 0, status.err
    assert json.loads(status.out)["source_sessions"] == {"in_use": in_use, "waiting": waiting, "max": cap}
    assert f"SOURCE SESSIONS  {in_use} in use of {cap}, {waiting} units waiting" in run_cli("status", env=env).out
    settings = svc.settings.replace(rate_limits="off", source_max_sessions=8)
    client = testing.TestClient(create_app(settings, sup.broker))
    assert client.simulate_get("/api/v1/queues").json["source_sessions"] == {"in_use": in_use, "waiting": waiting,
                                                                               "max": cap}
    families = {f.name: f.samples[0].value for f in text_string_to_metric_families(client.simulate_get("/metrics").text)
                if f.name.startswith("tracebus_source_sessions")}
    assert families == {"tracebus_source_sessions_in_use": in_use, "tracebus_source_sessions_waiting": waiting,
                        "tracebus_source_sessions_max": cap}


def test_readyz_names_a_source_that_refuses_connections(redis_client, settings):
    from tests.redis_server import free_port

    broker = Broker(settings)
    try:
        embedded = testing.TestClient(create_app(settings.replace(rate_limits="off"), broker)).simulate_get("/readyz")
        assert embedded.json["source"] == "embedded" and "source" not in embedded.json["missing"]
        refusing = settings.replace(rate_limits="off", source="oracle", oracle_dsn=f"127.0.0.1:{free_port()}/DWH",
                                    oracle_user="u", oracle_password="secret-pw")
        resp = testing.TestClient(create_app(refusing, broker)).simulate_get("/readyz")
        assert resp.status_code == 503
        assert "source" in resp.json["missing"] and resp.json["source"].startswith("unreachable: oracle:"), resp.json
        assert "secret-pw" not in resp.text
    finally:
        broker.close()
