"""``failover``: Redis moving under a running trace job, measured in one run.

Three measurements, each a trace job (``--cids`` CIDs of the scale-0.2 sample database, 2
worker processes, units of 500 CIDs) run by a real supervisor and submitted through the job
layer (no HTTP: the API is not what moves here):

1. **Failover mid-job** on a Sentinel group (primary, replica, three sentinels): the replica
   is promoted (``SENTINEL FAILOVER``) once a quarter of the units are done. Reported: the
   time from asking for the promotion to the first unit completed on the new primary
   (target <= 5 s; it includes the promotion itself), and whether the job's row digest
   equals that of the same job without a failover.
2. **A 3 s outage** of a one-node Redis with AOF: stopped a quarter into the job, started
   again 3 s later. Reported: the job's duration against the same job without an outage;
   the delay (difference) targets < 5 s.
3. **The WAIT option's cost** on the Sentinel group: the job with
   ``TRACEBUS_REDIS_WAIT_REPLICAS=1`` against 0, and the latency of one acknowledged write
   (the unit-commit path) against a plain one.
"""

from __future__ import annotations

import statistics
import time
import types

from bench.common import fmt_num, wait_until
from bench.trace_support import DOMAINS, PROFILE, RowDigest, sample_db, trace_cids

NAME = "failover"
HELP = "Sentinel failover mid-job, a 3 s outage, and the cost of WAIT for replicas"
DEFAULT_REPEAT = 1
DB_SCALE = 0.2
WORKER_ENV = {"TRACE_CHUNK_CIDS": "500", "TRACE_JOB_MAX_INFLIGHT_UNITS": "2", "TRACEBUS_LOG_LEVEL": "warning",
              "TRACE_USER_MAX_INFLIGHT": "50", "PYTHONUNBUFFERED": "1"}


def add_arguments(parser) -> None:
    parser.add_argument("--cids", type=int, default=None,
                        help="CIDs per job (default 20,000 x --scale)")


class Run:
    """One supervisor and an in-process job service on ``url``."""

    def __init__(self, ctx, url: str, db, tag: str, extra_env: dict | None = None):
        from api.settings import ApiSettings
        from tracebus.engine.actor import set_broker
        from tracebus.engine.broker import Broker
        from tracebus.trace.service import TraceService

        self.env = {**WORKER_ENV, "REDIS_URL": url, "TRACEBUS_SQLITE_PATH": str(db),
                    "TRACEBUS_KEY_PREFIX": f"bench{tag}", **(extra_env or {})}
        settings = ApiSettings.from_env(self.env)
        self.broker = Broker(settings)
        set_broker(self.broker)
        self.svc = TraceService(settings, self.broker)
        self.settings = settings
        self.sup = ctx.supervisor(url, ["tracebus.trace.tasks"], processes=2, queues=settings.queue,
                                  env=self.env, name=f"tracebus-{tag}")
        wait_until(lambda: len(self.sup.children()) >= 2, 30, 0.1, "workers up")

    def submit(self, cids: list[str]) -> str:
        request = {"profile": PROFILE, "container_ids": cids, "domains": list(DOMAINS)}
        return self.svc.submit(self.svc.parse(request, "bench"))

    def progress(self, job: str) -> dict | None:
        """The job's status, or None while Redis does not answer (as a poller sees it)."""
        from tracebus.engine.errors import BrokerError

        try:
            return self.svc.status(job)
        except BrokerError:
            return None

    def done(self, job: str) -> int:
        doc = self.progress(job)
        return -1 if doc is None else doc["progress"]["units_done"]

    def wait_final(self, job: str, timeout_s: float = 900) -> dict:
        from tracebus.jobs.view import FINAL_STATES

        found = {}

        def final():
            doc = self.progress(job)
            if doc is not None and doc["state"] in FINAL_STATES:
                found.update(doc)
                return True
            return False

        wait_until(final, timeout_s, 0.05, f"job {job}")
        return found

    def digest(self, job: str) -> str:
        from tracebus.jobs.store import JobStore

        store = JobStore(self.broker.client, self.settings)
        digest = RowDigest()
        for domain, layout in store.layouts(job, list(store.units_by_section(job))).items():
            for _, rows in store.iter_chunks(job, domain, layout):
                digest.add(domain, rows)
        return digest.hexdigest()

    def timed_job(self, cids: list[str], during=None) -> tuple[float, dict, str, object]:
        """Run one job; ``during(run, job)`` is called once a quarter of its units are done."""
        started = time.monotonic()
        job = self.submit(cids)
        extra = None
        if during is not None:
            total = self.svc.status(job)["progress"]["units_total"]
            wait_until(lambda: self.done(job) >= total // 4, 600, 0.02, "a quarter of the units")
            extra = during(self, job)
        status = self.wait_final(job)
        return time.monotonic() - started, status, self.digest(job), extra

    def stop(self) -> None:
        self.sup.stop()
        self.broker.close()


def _failover(group):
    def during(run: Run, job: str) -> float:
        asked = time.monotonic()
        group.failover()
        before = None
        while before is None or before < 0:
            before = run.done(job)
            time.sleep(0.02)
        wait_until(lambda: run.done(job) > before, 60, 0.02, "a unit done on the new primary")
        return time.monotonic() - asked
    return during


def _outage(server, seconds: float):
    def during(run: Run, job: str) -> float:
        server.stop()
        time.sleep(seconds)
        server.start()
        return seconds
    return during


def _write_latency_us(url: str, replicas: int, n: int = 500) -> float:
    """Median latency of one acknowledged write (the delay script, like a unit's commit)."""
    from tracebus.engine.connection import redis_client
    from tracebus.engine.durable import run_acknowledged
    from tracebus.engine.scripts import ENGINE_SCRIPTS

    client = redis_client(url)
    script = ENGINE_SCRIPTS.register(client, "delay")
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        run_acknowledged(client, script, ["bench:wait"], [1000, str(i)], replicas, 1000)
        samples.append((time.perf_counter() - t0) * 1e6)
    client.delete("bench:wait")
    client.close()
    return statistics.median(samples)


def run(args, ctx) -> dict:
    from tracebus.redis_proc import SentinelGroup

    n_cids = args.cids or int(20_000 * args.scale)
    db = sample_db(DB_SCALE, ctx.step)
    cids = trace_cids(db)[:n_cids]
    data: dict = {"cids": len(cids)}

    # -- 1 and 3: Sentinel ----------------------------------------------------------------------
    group = SentinelGroup(ctx.tmp / "sentinel").start()
    ctx.callback(group.stop)
    ctx.step(f"Sentinel group up: {group.url}")
    runs = {}
    for label, env in (("sentinel", {}), ("sentinel-wait", {"TRACEBUS_REDIS_WAIT_REPLICAS": "1"})):
        run_ = Run(ctx, group.url, db, label.replace("-", ""), env)
        seconds, status, digest, _ = run_.timed_job(cids)
        runs[label] = {"seconds": seconds, "state": status["state"], "digest": digest}
        ctx.step(f"{label}: {status['state']} in {seconds:.1f} s, digest {digest}")
        if label == "sentinel":
            seconds_f, status_f, digest_f, first_unit_s = run_.timed_job(cids, _failover(group))
            runs["sentinel-failover"] = {"seconds": seconds_f, "state": status_f["state"], "digest": digest_f,
                                         "first_unit_after_promotion_s": first_unit_s}
            ctx.step(f"failover: first unit on the new primary {first_unit_s:.2f} s after asking; job "
                     f"{status_f['state']} in {seconds_f:.1f} s, digest {digest_f}")
        run_.stop()
        group.wait_replica()  # the old primary, now a replica, back in sync before WAIT needs it
    latency = {r: _write_latency_us(group.url, r) for r in (0, 1)}
    ctx.step(f"acknowledged write: {latency[0]:.0f} us without WAIT, {latency[1]:.0f} us with WAIT 1")

    # -- 2: a 3 s outage of one node with AOF ---------------------------------------------------
    server = ctx.redis("--appendonly", "yes", "--appendfsync", "everysec")
    run_ = Run(ctx, server.url, db, "single")
    base_s, base_status, base_digest, _ = run_.timed_job(cids)
    out_s, out_status, out_digest, _ = run_.timed_job(cids, _outage(server, 3.0))
    run_.stop()
    runs["single"] = {"seconds": base_s, "state": base_status["state"], "digest": base_digest}
    runs["single-outage"] = {"seconds": out_s, "state": out_status["state"], "digest": out_digest}
    ctx.step(f"outage: {out_s:.1f} s against {base_s:.1f} s without")

    first_unit = runs["sentinel-failover"]["first_unit_after_promotion_s"]
    delay = out_s - base_s
    wait_cost = runs["sentinel-wait"]["seconds"] / runs["sentinel"]["seconds"]
    same_failover = runs["sentinel-failover"]["digest"] == runs["sentinel"]["digest"]
    same_outage = runs["single-outage"]["digest"] == runs["single"]["digest"] == runs["sentinel"]["digest"]
    data.update(runs=runs, write_latency_us=latency)
    targets = [
        {"name": "failover mid-job", "target": "promotion to first unit completed on the new primary <= 5 s",
         "measured": f"{first_unit:.2f} s", "met": first_unit <= 5.0},
        {"name": "failover mid-job", "target": "the job completes with the same rows (digest)",
         "measured": runs["sentinel-failover"]["state"] + (", same digest" if same_failover else ", DIFFERENT digest"),
         "met": same_failover and runs["sentinel-failover"]["state"] == "completed"},
        {"name": "3 s Redis outage", "target": "the job's delay < 5 s", "measured": f"{delay:.1f} s",
         "met": delay < 5.0},
        {"name": "3 s Redis outage", "target": "the job completes with the same rows (digest)",
         "measured": runs["single-outage"]["state"] + (", same digest" if same_outage else ", DIFFERENT digest"),
         "met": same_outage and runs["single-outage"]["state"] == "completed"},
        {"name": "WAIT option", "target": "its cost measured",
         "measured": f"job x{wait_cost:.2f}; one write {latency[0]:.0f} -> {latency[1]:.0f} us", "met": None},
    ]
    rows = [[label, r["state"], fmt_num(r["seconds"], 1), r["digest"]] for label, r in runs.items()]
    return {
        "summary": (f"{len(cids):,}-CID trace job, 2 workers. Failover: first unit on the new primary "
                    f"{first_unit:.2f} s after asking for the promotion; 3 s outage: +{delay:.1f} s; "
                    f"WAIT 1 replica: job x{wait_cost:.2f}, one write {latency[0]:.0f} -> {latency[1]:.0f} us."),
        "targets": targets,
        "tables": [
            {"title": "Jobs", "columns": ["run", "state", "seconds", "row digest"], "rows": rows},
            {"title": "The WAIT option (TRACEBUS_REDIS_WAIT_REPLICAS)",
             "columns": ["", "no WAIT", "WAIT 1 replica", "ratio"],
             "rows": [["job seconds", fmt_num(runs["sentinel"]["seconds"], 1),
                       fmt_num(runs["sentinel-wait"]["seconds"], 1), f"{wait_cost:.2f}"],
                      ["one acknowledged write, median us", fmt_num(latency[0]), fmt_num(latency[1]),
                       f"{latency[1] / latency[0]:.2f}"]]},
        ],
        "data": data,
    }
