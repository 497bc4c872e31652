"""``source-control``: how fast a running statement stops on the PostgreSQL server, and the
session cap under load (issue 35).

Its own PostgreSQL (``tracebus.pg_proc``) and Redis; the units are those of the tests' SQL kind
(``tests/kind_sql.py``): a ``spin`` unit reads a table that a second session keeps locked, so
its statement stays ``active`` in pg_stat_activity until something stops it. For each path,
``--repeat`` tries (default 20), one worker process, the time from the trigger to the moment
pg_stat_activity shows that backend no longer ``active`` (polled every 5 ms):

* **cancel**: from ``JobStore.cancel`` (what ``POST /api/v1/jobs/{id}/cancel`` and the abandon
  routes call);
* **job time limit**: from the job's deadline (created + ``TRACE_JOB_TIMEOUT_SECONDS`` = 2 s);
* **unit time limit**: from the unit's statement start + its time limit (1.5 s);
* **SIGKILL**: from the SIGKILL of the worker running the statement (the server notices the
  closed socket: ``client_connection_check_interval`` 1 s).

Then **the cap**: 10 jobs of 6 ``nap`` units (0.2 s statements) on 2 supervisors x 2 worker
processes under ``TRACEBUS_SOURCE_MAX_SESSIONS=3``, tracebus's active statements counted in
pg_stat_activity every 10 ms until every job ended.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time

from bench.common import fmt_stat, summarize, wait_until

NAME = "source-control"
HELP = "time from cancel, time limits and SIGKILL to the PostgreSQL statement's end; sessions under a cap"
DEFAULT_REPEAT = 20
BOUNDS_S = {"cancel": 2.0, "job time limit": 2.0, "unit time limit": 2.0, "SIGKILL": 10.0}
JOB_LIMIT_S, UNIT_LIMIT_S, CAP = 2, 1.5, 3


def _active(conn, job_id: str | None = None) -> list[tuple]:
    pattern = f"tracebus {job_id} %" if job_id else "tracebus %"
    return conn.execute("SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE %s "
                        "AND state = 'active' AND pid <> pg_backend_pid()", [pattern]).fetchall()


class Bench:
    def __init__(self, ctx, redis_url: str, dsn: str):
        import psycopg

        self.ctx, self.redis_url, self.dsn = ctx, redis_url, dsn
        self.admin = psycopg.connect(dsn, autocommit=True)
        self.runs = 0

    def workers(self, processes: int, sups: int = 1, **env):
        from api.settings import ApiSettings
        from tracebus.engine.actor import set_broker
        from tracebus.engine.broker import Broker
        from tracebus.engine.registry import WorkerRegistry
        from tracebus.trace.service import TraceService

        self.runs += 1
        env = {"TRACEBUS_SOURCE": "postgres", "TRACEBUS_POSTGRES_DSN": self.dsn, "TRACEBUS_LOG_LEVEL": "warning",
               "TRACEBUS_KEY_PREFIX": f"bench{self.runs}", "TRACE_USER_MAX_INFLIGHT": "50", **env}
        settings = ApiSettings.from_env({**env, "REDIS_URL": self.redis_url})
        broker = Broker(settings)
        set_broker(broker)
        svc = TraceService(settings, broker)
        procs = [self.ctx.supervisor(self.redis_url, ["tracebus.trace.tasks", "tests.kind_sql"], processes=processes,
                                     queues=settings.queue, env=env, name=f"tracebus-{self.runs}-{i}")
                 for i in range(sups)]
        registry = WorkerRegistry(broker)
        wait_until(lambda: len(registry.list()) >= processes * sups, 60, what="workers")
        return svc, procs

    def lock(self):
        import psycopg
        from tests import kind_sql

        conn = psycopg.connect(self.dsn)
        conn.execute(f"LOCK TABLE {kind_sql.LOCKED_TABLE} IN ACCESS EXCLUSIVE MODE")
        return conn

    def running(self, job_id: str) -> tuple:
        """(pid, query_start) of the job's ``spin`` statement once it waits on the lock."""
        found = []

        def blocked():
            row = self.admin.execute(
                "SELECT pid, query_start FROM pg_stat_activity WHERE application_name LIKE %s AND state = 'active' "
                "AND wait_event_type = 'Lock'", [f"tracebus {job_id} %"]).fetchone()
            found[:] = [row] if row else []
            return bool(row)

        wait_until(blocked, 30, what=f"{job_id}'s statement")
        return found[0]

    def ended_at(self, pid: int, query_start) -> float:
        """time.monotonic() when backend ``pid`` is seen no longer running that statement."""
        while True:
            row = self.admin.execute("SELECT state, query_start FROM pg_stat_activity WHERE pid = %s",
                                     [pid]).fetchone()
            if row is None or row[0] != "active" or row[1] != query_start:
                return time.monotonic()
            time.sleep(0.005)

    def path(self, name: str, tries: int, env: dict, trigger) -> list[float]:
        from tests import kind_sql

        svc, procs = self.workers(1, **env)
        out = []
        for i in range(tries):
            lock = self.lock()
            try:
                job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
                pid, query_start = self.running(job_id)
                since = trigger(svc, procs[0], job_id, pid)
                out.append(self.ended_at(pid, query_start) - since)
                try:
                    svc.store.cancel(job_id)
                except Exception:
                    pass  # ended already (its time limit)
            finally:
                lock.rollback()
                lock.close()
            wait_until(lambda: not _active(self.admin), 30, what="no statement left")
        for proc in procs:
            proc.stop()
        self.ctx.step(f"{name}: median {statistics.median(out):.3f} s, max {max(out):.3f} s over {tries}")
        return out

    def sessions(self, jobs: int, units: int) -> dict:
        from tests import kind_sql

        svc, procs = self.workers(2, sups=2, TRACEBUS_SOURCE_MAX_SESSIONS=str(CAP))
        samples: list[int] = []
        stop = threading.Event()

        def sample():
            import psycopg
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not stop.wait(0.01):
                    samples.append(len(_active(conn)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        ids = [kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["nap"] * units, user=f"u{i}")
               for i in range(jobs)]
        ends = {}

        def all_ended():
            for job_id in ids:
                if job_id not in ends and svc.store.status(job_id)["status"] in ("completed", "partial", "failed"):
                    ends[job_id] = time.monotonic() - started
            return len(ends) == len(ids)

        wait_until(all_ended, 300, what="every job")
        stop.set()
        sampler.join()
        for proc in procs:
            proc.stop()
        statuses = [svc.store.status(j)["status"] for j in ids]
        return {"samples": len(samples), "max": max(samples), "mean": statistics.mean(samples),
                "histogram": {n: samples.count(n) for n in sorted(set(samples))},
                "statuses": statuses, "job_seconds": summarize(list(ends.values())),
                "seconds": time.monotonic() - started}


def run(args, ctx) -> dict:
    import psycopg
    from tests import kind_sql
    from tracebus.pg_proc import PostgresServer

    redis = ctx.redis()
    pg = PostgresServer().start()  # a temporary folder of its own: the postgres user cannot enter ctx.tmp
    ctx.callback(pg.stop)
    dsn = pg.database("control")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {kind_sql.LOCKED_TABLE} (x int)")
        conn.execute(f"INSERT INTO {kind_sql.LOCKED_TABLE} VALUES (1)")
        version = conn.execute("SHOW server_version").fetchone()[0]
    ctx.step(f"PostgreSQL {version} on port {pg.port}")
    bench = Bench(ctx, redis.url, dsn)
    tries = args.repeat

    def cancel(svc, proc, job_id, pid):
        since = time.monotonic()
        svc.store.cancel(job_id)
        return since

    def job_limit(svc, proc, job_id, pid):
        created = int(svc.store.redis.hget(svc.store.keys.job(job_id), "created_ms")) / 1000
        return time.monotonic() - (time.time() - (created + JOB_LIMIT_S))

    def unit_limit(svc, proc, job_id, pid):
        started = float(svc.store.redis.hget(kind_sql.marks_key(svc.settings.key_prefix, job_id, 0), "started"))
        return time.monotonic() - (time.time() - (started + UNIT_LIMIT_S))

    def sigkill(svc, proc, job_id, pid):
        port = bench.admin.execute("SELECT client_port FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]
        worker = next(w for w in proc.children()
                      if any(c.laddr and c.laddr.port == port for c in w.net_connections("tcp")))
        since = time.monotonic()
        os.kill(worker.pid, signal.SIGKILL)
        return since

    paths = {
        "cancel": bench.path("cancel", tries, {}, cancel),
        "job time limit": bench.path("job time limit", tries, {"TRACE_JOB_TIMEOUT_SECONDS": str(JOB_LIMIT_S)},
                                     job_limit),
        "unit time limit": bench.path("unit time limit", tries,
                                      {"TEST_SQL_UNIT_LIMIT_MS": str(int(UNIT_LIMIT_S * 1000))}, unit_limit),
        "SIGKILL": bench.path("SIGKILL", tries, {}, sigkill),
    }
    ctx.step("the cap: 10 jobs of 6 units, 2 supervisors x 2 workers, cap 3")
    cap = bench.sessions(10, 6)
    ctx.step(f"cap: max {cap['max']} active statements over {cap['samples']} samples, mean {cap['mean']:.2f}")
    bench.admin.close()
    stats = {name: summarize(values) for name, values in paths.items()}
    targets = [{"name": f"{name}: statement ended on the server (max of {tries})", "target": f"<= {BOUNDS_S[name]:g} s",
                "measured": f"{stats[name]['max']:.3f} s", "met": stats[name]["max"] <= BOUNDS_S[name]}
               for name in paths]
    targets.append({"name": f"active statements under TRACEBUS_SOURCE_MAX_SESSIONS={CAP} (4 workers, 2 supervisors)",
                    "target": f"<= {CAP}", "measured": str(cap["max"]), "met": cap["max"] <= CAP})
    return {
        "summary": (f"PostgreSQL {version}, one worker per path, {tries} tries each: seconds from the trigger to "
                    "pg_stat_activity showing the statement's backend no longer active (polled every 5 ms)."),
        "targets": targets,
        "tables": [{"title": "Trigger to the server statement's end (s)",
                    "columns": ["path", "median", "min", "max", "tries"],
                    "rows": [[name, f"{s['median']:.3f}", f"{s['min']:.3f}", f"{s['max']:.3f}", s["n"]]
                             for name, s in stats.items()]},
                   {"title": f"Active tracebus statements every 10 ms, 10 jobs x 6 units of 0.2 s, cap {CAP}",
                    "columns": ["samples", "max", "mean", "histogram (count: samples)", "job end (s)", "all done (s)"],
                    "rows": [[cap["samples"], cap["max"], f"{cap['mean']:.2f}",
                              ", ".join(f"{n}: {c}" for n, c in cap["histogram"].items()),
                              fmt_stat(cap["job_seconds"], 1), f"{cap['seconds']:.1f}"]]}],
        "data": {"paths": stats, "cap": cap},
    }
