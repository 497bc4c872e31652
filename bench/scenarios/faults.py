"""``faults``: random faults during a stream of 20K-CID trace jobs; no job may be stranded.

One system (AOF Redis, supervisor with 2 workers, gunicorn) runs a stream of trace jobs of
20,000 CIDs each, two in flight at a time (each job one of three CID windows, whose expected
row digest is read once straight from SQLite). Meanwhile a seeded random fault is injected
every few seconds, ``--faults`` in all, drawn from:

* ``redis-restart``: redis-server stopped (SIGTERM) and started again on its port and AOF;
* ``oom``: ``CONFIG SET maxmemory`` below what Redis uses for a few seconds (noeviction);
* ``supervisor-kill``: the supervisor SIGKILLed (its workers exit as orphans) and a new
  one started;
* ``worker-kill``: one worker SIGKILLed.

Submits that meet a fault (503, 507) are retried. After the last fault the stream stops and
every job is waited for up to its timeout. Reported: jobs stranded (still queued or running
past their timeout, or left in Redis's in-flight indexes), jobs completed with the right
digest, jobs failed or partial and whether each has a reason, and the longest submit-to-final
time against ``TRACE_JOB_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time

import redis

from bench import trace_support as ts

NAME = "faults"
HELP = "50 random faults (Redis restart, OOM, supervisor/worker kill) during 20K-CID jobs: 0 stranded (~10 min)"
DEFAULT_REPEAT = 1
JOB_CIDS = 20_000
JOB_TIMEOUT_S = 300
FAULTS = ("redis-restart", "oom", "supervisor-kill", "worker-kill")
#: Settings of the system under test: the sweeper runs often, so a stranded job would be
#: resumed within seconds; a dead consumer's entries are claimed after 5 s.
FAULT_ENV = {"TRACE_JOB_TIMEOUT_SECONDS": str(JOB_TIMEOUT_S), "TRACE_JOB_SWEEP_SECONDS": "2",
             "TRACE_JOB_SWEEP_GRACE_SECONDS": "5", "TRACEBUS_CLAIM_MIN_IDLE_MS": "5000",
             "TRACE_JOB_TTL_SECONDS": "900", "TRACEBUS_LOG_LEVEL": "info"}


def add_arguments(parser) -> None:
    parser.add_argument("--faults", type=int, default=50, help="faults to inject (default 50)")
    parser.add_argument("--every", type=float, default=6.0, help="mean seconds between faults (default 6)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--seed", type=int, default=12, help="seed of the fault sequence (default 12)")


class Stream:
    """Keeps two jobs in flight, records every job and every refused submit."""

    def __init__(self, ctx, system: ts.System, windows: list[list[str]]):
        self.ctx, self.system, self.windows = ctx, system, windows
        self.jobs: dict[str, dict] = {}
        self.refused: dict[int, int] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.n = 0

    def run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                live = [j for j in self.jobs.values() if j["final"] is None]
            if len(live) < 2:
                self._submit()
            self._poll(live)
            time.sleep(0.5)

    def _submit(self) -> None:
        window = self.n % len(self.windows)
        body = {"profile": ts.PROFILE, "container_ids": self.windows[window], "domains": list(ts.DOMAINS)}
        try:
            status, payload = self.system.http("POST", "/api/trace/events", body=body)
        except OSError:
            status, payload = 0, b""
        if status != 202:
            self.refused[status] = self.refused.get(status, 0) + 1
            return
        job_id = json.loads(payload)["job_id"]
        with self.lock:
            if job_id not in self.jobs:
                self.jobs[job_id] = {"job_id": job_id, "window": window, "submitted": time.monotonic(),
                                     "final": None, "state": None, "error": None}
        self.n += 1
        self.ctx.step(f"job {len(self.jobs)} submitted ({job_id}, window {window})")

    def _poll(self, live: list[dict]) -> None:
        for job in live:
            try:
                status, payload = self.system.http("GET", f"/api/trace/job/{job['job_id']}")
            except OSError:
                continue
            if status != 200:
                continue
            doc = json.loads(payload)
            if doc["state"] in ("completed", "partial", "failed", "cancelled"):
                job.update(final=time.monotonic(), state=doc["state"], error=doc.get("error"),
                           doc=doc)
                self.ctx.step(f"job {job['job_id']} {doc['state']} after "
                              f"{job['final'] - job['submitted']:.1f} s")

    def drain(self, timeout_s: float) -> None:
        """Wait until every job is final or past its timeout (plus a sweep)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = [j for j in self.jobs.values() if j["final"] is None]
            if not live:
                return
            self._poll(live)
            time.sleep(0.5)


class Faults:
    """Injects the seeded fault sequence into the system."""

    def __init__(self, ctx, system: ts.System, args):
        self.ctx, self.system, self.args = ctx, system, args
        self.rng = random.Random(args.seed)
        self.log: list[dict] = []

    def run(self) -> None:
        for i in range(self.args.faults):
            time.sleep(self.rng.uniform(0.5, 1.5) * self.args.every)
            kind = self.rng.choice(FAULTS)
            t0 = time.monotonic()
            detail = getattr(self, "_" + kind.replace("-", "_"))()
            self.log.append({"n": i + 1, "fault": kind, "detail": detail, "seconds": time.monotonic() - t0})
            self.ctx.step(f"fault {i + 1}/{self.args.faults}: {kind} {detail}")

    def _redis_restart(self) -> str:
        server = self.system.redis_server
        server.stop()
        time.sleep(self.rng.uniform(0.5, 2.0))
        server.start(timeout_s=60)
        return "down and up again"

    def _oom(self) -> str:
        client = redis.Redis.from_url(self.system.url)
        try:
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", max(used - (4 << 20), 1 << 20))
            hold = self.rng.uniform(2.0, 4.0)
            time.sleep(hold)
        finally:
            client.config_set("maxmemory", 0)
            client.close()
        return f"for {hold:.1f} s"

    def _supervisor_kill(self) -> str:
        old = self.system.supervisor
        os.kill(old.pid, signal.SIGKILL)
        old.popen.wait()
        self.system.supervisor = self.ctx.supervisor(
            self.system.url, ["tracebus.trace.tasks"], processes=self.args.processes, queues="trace-events",
            env=self.system.supervisor_env, name=f"tracebus-{len(self.log)}")
        return f"pid {old.pid}, new supervisor {self.system.supervisor.pid}"

    def _worker_kill(self) -> str:
        workers = self.system.supervisor.children()
        if not workers:
            return "(no worker alive)"
        victim = self.rng.choice(workers)
        try:
            os.kill(victim.pid, signal.SIGKILL)
        except ProcessLookupError:
            return "(it had exited)"
        return f"pid {victim.pid}"


def _in_flight_in_redis(system: ts.System) -> list[str]:
    from tracebus.jobs.keys import JobKeys

    keys = JobKeys("tracebus")
    now_ms = int(time.time() * 1000)
    out = []
    for status in ("queued", "running"):
        out += [j.decode() for j in system.client.zrangebyscore(keys.jobs_by_status(status), now_ms, "+inf")]
    return out


def run(args, ctx) -> dict:
    db = ts.sample_db(args.scale, ctx.step)
    cids = ts.trace_cids(db)
    if len(cids) < JOB_CIDS + 2:
        raise SystemExit(f"scale {args.scale:g} has {len(cids):,} trace CIDs; 20K-CID jobs need --scale 0.2 or more")
    step = max(1, (len(cids) - JOB_CIDS) // 2)
    windows = [cids[i * step:i * step + JOB_CIDS] for i in range(3)]
    expected = []
    for i, window in enumerate(windows):
        expected.append(ts.run_baseline(ctx, db, window, digest=True)["digest"])
        ctx.step(f"window {i}: expected digest {expected[-1]}")

    system = ts.System(ctx, db, processes=args.processes, worker_env=FAULT_ENV, api_env=FAULT_ENV,
                       redis_args=("--appendonly", "yes", "--appendfsync", "everysec",
                                   "--maxmemory-policy", "noeviction"))
    system.supervisor_env = {**system.env, **FAULT_ENV}
    stream, faults = Stream(ctx, system, windows), Faults(ctx, system, args)
    submitter = threading.Thread(target=stream.run, daemon=True)
    t0 = time.monotonic()
    submitter.start()
    try:
        faults.run()
    finally:
        stream.stop.set()
        submitter.join()
    ctx.step(f"{args.faults} faults in {time.monotonic() - t0:.0f} s; waiting for {len(stream.jobs)} jobs")
    stream.drain(JOB_TIMEOUT_S + 30)

    jobs = list(stream.jobs.values())
    stranded = [j["job_id"] for j in jobs if j["final"] is None]
    leftover = [j for j in _in_flight_in_redis(system) if j not in stranded]
    completed = [j for j in jobs if j["state"] == "completed"]
    for job in completed:
        job["digest"] = ts.digest_from_redis(system, job["job_id"])["digest"]
        job["right"] = job["digest"] == expected[job["window"]]
    ended = [j for j in jobs if j["state"] in ("failed", "partial", "cancelled")]
    with_reason = [j for j in ended if j["error"]]
    durations = [j["final"] - j["submitted"] for j in jobs if j["final"] is not None]
    longest = max(durations) if durations else 0.0
    right = sum(1 for j in completed if j["right"])
    counts = {}
    for f in faults.log:
        counts[f["fault"]] = counts.get(f["fault"], 0) + 1
    targets = [
        {"name": "jobs stranded over the fault run (issue 12)", "target": "0",
         "measured": f"{len(stranded) + len(leftover)} ({len(jobs)} jobs, {args.faults} faults)",
         "met": not stranded and not leftover},
        {"name": "completed jobs with the right row digest", "target": "all",
         "measured": f"{right} of {len(completed)}", "met": right == len(completed)},
        {"name": "failed/partial jobs with a reason", "target": "all",
         "measured": f"{len(with_reason)} of {len(ended)}", "met": len(with_reason) == len(ended)},
        {"name": "each job final within its timeout", "target": f"<= {JOB_TIMEOUT_S} s",
         "measured": f"longest {longest:.1f} s", "met": bool(durations) and longest <= JOB_TIMEOUT_S
         and not stranded},
    ]
    rows = [[j["job_id"], j["window"], j["state"] or "NOT FINAL",
             f"{j['final'] - j['submitted']:.1f}" if j["final"] else "-",
             ("right" if j.get("right") else "WRONG") if j["state"] == "completed" else "-",
             (j["error"] or "")[:120]] for j in jobs]
    tables = [{"title": "Jobs", "columns": ["job", "CID window", "state", "submit to final s", "digest", "reason"],
               "rows": rows},
              {"title": "Faults", "columns": ["#", "fault", "detail", "injection s"],
               "rows": [[f["n"], f["fault"], f["detail"], f"{f['seconds']:.1f}"] for f in faults.log]}]
    notes = [f"Fault mix: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; seed {args.seed}, "
             f"one every {args.every:g} s on average.",
             f"Submits refused while a fault lasted (retried): {stream.refused or 'none'} (HTTP status: count).",
             "A job that meets a full Redis ends failed with the reason 'Redis is full'; one whose worker, "
             "supervisor or Redis died is resumed (redelivery, janitor, sweeper) and completes.",
             "Shared 2-core machine: other sessions' work ran at the same time."]
    return {"summary": f"{len(jobs)} trace jobs of {JOB_CIDS:,} CIDs (scale {args.scale:g}), {args.processes} "
                       f"workers, {args.faults} random faults.",
            "targets": targets, "tables": tables, "notes": notes,
            "data": {"jobs": [{k: v for k, v in j.items() if k != "doc"} for j in jobs], "faults": faults.log,
                     "refused": stream.refused, "expected": expected, "leftover": leftover}}
