"""A job kind of the tests whose units each run one statement on the worker's source and
record, in Redis, when the statement started and when it ended (tests/test_source_control.py,
the PostgreSQL control tests, ``bench source-control``).

The unit's input (one item per unit) names the statement: ``spin`` runs until it is stopped
(SQLite: a recursive count to 10^12; PostgreSQL: a read of the table :data:`LOCKED_TABLE`,
which a test keeps locked), ``quick`` returns one row at once, ``nap`` after 0.2 s on
PostgreSQL. Importing the module registers
the kind; a worker runs it with ``tracebus worker tracebus.trace.tasks tests.kind_sql``.
"""

from __future__ import annotations

import os
import time

from tracebus.jobs.spec import JobSpec
from tracebus.trace import kinds
from tracebus.trace.jobkind import ACTOR_OPTIONS, JobKind

SECTION = "rows"
#: The table a PostgreSQL test locks (ACCESS EXCLUSIVE) to keep a unit's statement waiting.
LOCKED_TABLE = "tracebus_test_locked"
STATEMENTS = {
    "sqlite": {"spin": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) "
                       "SELECT count(*) FROM c",
               "quick": "SELECT 1", "nap": "SELECT 1"},
    "postgres": {"spin": f"SELECT count(*) FROM {LOCKED_TABLE}", "quick": "SELECT 1",
                 "nap": "SELECT 1 FROM pg_sleep(0.2)"},
}


def marks_key(prefix: str, job_id: str, unit: int) -> str:
    """Hash: ``started`` / ``ended`` (epoch seconds) and ``error`` of a unit's statement."""
    return f"{prefix}:test:sql:{job_id}:{unit}"


class SqlKind(JobKind):
    name = "test-sql"
    actor_name = "test_sql_unit"
    profiles = ("test_sql",)
    # A worker's environment may shorten the unit's time limit (the tests of that path).
    actor_options = {**ACTOR_OPTIONS,
                     "time_limit_ms": int(os.environ.get("TEST_SQL_UNIT_LIMIT_MS", "600000"))}

    def run_unit(self, unit):
        what = unit.input[0]
        dialect = "sqlite" if type(unit.source).__name__ == "SqliteSource" else "postgres"
        key = marks_key(unit.store.keys.prefix, unit.job_id, unit.unit)
        redis = unit.store.redis
        redis.hset(key, "started", time.time())
        redis.expire(key, 600)
        try:
            for rows in unit.source.execute(STATEMENTS[dialect][what], {}, 100):
                unit.write(["N"], rows)
        except BaseException as e:
            redis.hset(key, "error", f"{type(e).__name__}: {e}")
            raise
        finally:
            redis.hset(key, "ended", time.time())


SQL = kinds.register(SqlKind())


def submit(store, dispatcher, queue: str, statements: list[str], user: str = "ctl-user") -> str:
    """Create and start a job with one unit per statement name."""
    spec = JobSpec(kind=SQL.name, user=user, sections=(SECTION,), items=statements, chunk_items=1,
                   queue=queue, actor_name=SQL.actor_name, app={"profile": "test_sql", "params": {}})
    job_id = store.create(spec)
    dispatcher.start(job_id)
    return job_id
