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
   again 3 s later. Reported: the job's duration against the same job without an outage in
   the same round (the delay targets < 5 s), and the time from Redis's return to the next
   unit completed.
3. **The WAIT option's cost** on the Sentinel group: the job with
   ``TRACEBUS_REDIS_WAIT_REPLICAS=1`` against 0, and the latency of one acknowledged write
   (the unit-commit path) against a plain one.
"""

from __future__ import annotations

import statistics
import time

from bench.common import fmt_stat, summarize, wait_until
from bench.trace_support import DOMAINS, PROFILE, RowDigest, sample_db, trace_cids

NAME = "failover"
HELP = "Sentinel failover mid-job, a 3 s outage, and the cost of WAIT for replicas"
DEFAULT_REPEAT = 3
DB_SCALE = 0.2
OUTAGE_S = 3.0
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


def _first_unit_after(run: Run, job: str, since: float) -> float:
    """Seconds from ``since`` until a unit completes after Redis answers again."""
    before = -1
    while before < 0:
        before = run.done(job)
        time.sleep(0.02)

    def moved_on() -> bool:
        doc = run.progress(job)
        return doc is not None and (doc["progress"]["units_done"] > before
                                    or doc["progress"]["units_done"] == doc["progress"]["units_total"])

    wait_until(moved_on, 60, 0.02, "a unit done after Redis came back")
    return time.monotonic() - since


def _failover(group):
    def during(run: Run, job: str) -> float:
        asked = time.monotonic()
        group.failover()
        return _first_unit_after(run, job, asked)
    return during


def _outage(server, seconds: float):
    def during(run: Run, job: str) -> float:
        server.stop()
        time.sleep(seconds)
        server.start()
        return _first_unit_after(run, job, time.monotonic())
    return during


def _write_latency_us(url: str, replicas: int, n: int = 500) -> float:
    """Median latency of one acknowledged write (the delay script, like a unit's commit)."""
    from tracebus.engine.connection import redis_client
    from tracebus.engine.scripts import ENGINE_SCRIPTS

    client = redis_client(url)
    script = ENGINE_SCRIPTS.register(client, "delay")
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        script({"delayed": "bench:wait"}, {"delay_ms": 1000, "payload": str(i)}, wait=(replicas, 1000))
        samples.append((time.perf_counter() - t0) * 1e6)
    client.delete("bench:wait")
    client.close()
    return statistics.median(samples)


def _round(ctx, group, server, db, cids, n: int) -> dict:
    """One round: every run once, each on its own key prefix."""
    out = {}
    for label, url, env, during in (
            ("sentinel", group.url, {}, None),
            ("sentinel-failover", group.url, {}, _failover(group)),
            ("sentinel-wait", group.url, {"TRACEBUS_REDIS_WAIT_REPLICAS": "1"}, None),
            ("single", server.url, {}, None),
            ("single-outage", server.url, {}, _outage(server, OUTAGE_S))):
        if label == "sentinel-wait":
            group.wait_replica()  # the old primary, now a replica, back in sync before WAIT needs it
        run_ = Run(ctx, url, db, f"{label.replace('-', '')}{n}", env)
        seconds, status, digest, after = run_.timed_job(cids, during)
        run_.stop()
        out[label] = {"seconds": seconds, "state": status["state"], "digest": digest, "first_unit_after_s": after}
        ctx.step(f"round {n}, {label}: {status['state']} in {seconds:.1f} s, digest {digest}"
                 + (f"; first unit {after:.2f} s after Redis was back or asked to move" if after else ""))
    group.wait_replica()
    out["write_latency_us"] = {r: _write_latency_us(group.url, r) for r in (0, 1)}
    return out


def run(args, ctx) -> dict:
    from tracebus.redis_proc import SentinelGroup

    n_cids = args.cids or int(20_000 * args.scale)
    db = sample_db(DB_SCALE, ctx.step)
    cids = trace_cids(db)[:n_cids]
    group = SentinelGroup(ctx.tmp / "sentinel").start()
    ctx.callback(group.stop)
    ctx.step(f"Sentinel group up: {group.url}")
    server = ctx.redis("--appendonly", "yes", "--appendfsync", "everysec")
    rounds = [_round(ctx, group, server, db, cids, n + 1) for n in range(args.repeat)]

    labels = ("sentinel", "sentinel-failover", "sentinel-wait", "single", "single-outage")
    seconds = {label: summarize([r[label]["seconds"] for r in rounds]) for label in labels}
    first_failover = summarize([r["sentinel-failover"]["first_unit_after_s"] for r in rounds])
    first_outage = summarize([r["single-outage"]["first_unit_after_s"] for r in rounds])
    # per round, so that a loaded round is compared with itself
    delay = summarize([r["single-outage"]["seconds"] - r["single"]["seconds"] for r in rounds])
    wait_ratio = summarize([r["sentinel-wait"]["seconds"] / r["sentinel"]["seconds"] for r in rounds])
    latency = {k: summarize([r["write_latency_us"][k] for r in rounds]) for k in (0, 1)}
    reference = rounds[0]["sentinel"]["digest"]
    same = {label: all(r[label]["digest"] == reference and r[label]["state"] == "completed" for r in rounds)
            for label in labels}
    targets = [
        {"name": "failover mid-job", "target": "promotion to first unit completed on the new primary <= 5 s",
         "measured": f"{fmt_stat(first_failover, 2)} s", "met": first_failover["max"] <= 5.0},
        {"name": "failover mid-job", "target": "the job completes with the same rows (digest)",
         "measured": "same" if same["sentinel-failover"] else "DIFFERENT", "met": same["sentinel-failover"]},
        {"name": "3 s Redis outage", "target": "the job's delay < 5 s",
         "measured": f"{fmt_stat(delay, 1)} s (first unit {fmt_stat(first_outage, 2)} s after Redis was back)",
         "met": delay["max"] < 5.0},
        {"name": "3 s Redis outage", "target": "the job completes with the same rows (digest)",
         "measured": "same" if same["single-outage"] else "DIFFERENT", "met": same["single-outage"]},
        {"name": "WAIT option", "target": "its cost measured",
         "measured": f"job x{fmt_stat(wait_ratio, 2)}; one write {fmt_stat(latency[0])} -> "
                     f"{fmt_stat(latency[1])} us", "met": None},
    ]
    return {
        "summary": (f"{len(cids):,}-CID trace job, 2 workers, {args.repeat} round(s), medians (min-max). "
                    f"Failover: first unit on the new primary {fmt_stat(first_failover, 2)} s after asking for "
                    f"the promotion; 3 s outage: job +{fmt_stat(delay, 1)} s; WAIT for 1 replica: job "
                    f"x{fmt_stat(wait_ratio, 2)}, one write {fmt_stat(latency[0])} -> {fmt_stat(latency[1])} us. "
                    f"Load average at the start and end is in the environment section: the machine is shared."),
        "targets": targets,
        "tables": [
            {"title": "Jobs (seconds, median and min-max over the rounds)",
             "columns": ["run", "seconds", "same rows as the first run"],
             "rows": [[label, fmt_stat(seconds[label], 1), str(same[label])] for label in labels]},
            {"title": "The WAIT option (TRACEBUS_REDIS_WAIT_REPLICAS)",
             "columns": ["", "no WAIT", "WAIT 1 replica", "ratio"],
             "rows": [["job seconds", fmt_stat(seconds["sentinel"], 1), fmt_stat(seconds["sentinel-wait"], 1),
                       fmt_stat(wait_ratio, 2)],
                      ["one acknowledged write, median us", fmt_stat(latency[0]), fmt_stat(latency[1]),
                       f"{latency[1]['median'] / latency[0]['median']:.2f}"]]},
        ],
        "data": {"cids": len(cids), "rounds": rounds},
    }
