"""``throughput``: no-op jobs through tracebus, RQ, Dramatiq and Celery on one Redis, in one run.

For each system (interleaved, ``--repeat`` rounds): the one-message enqueue rate
(``--jobs`` calls), the bulk enqueue rate where the system has a bulk API, then for each
worker configuration the drain rate: the queue is filled first, then the workers start,
and the run ends when the queue is empty and every job has run. Executions are counted
in the task bodies (:mod:`bench.counter`); the drain rate is jobs over the time from the
first task to the last (the rate "including start" also counts the workers' boot).
Then the recovery probe: a SIGKILLed tracebus worker's message must run again on
another worker within 2 s. Targets are issue 2's, stated in the report.
"""

from __future__ import annotations

import os
import re
import time

import redis

from bench import counter
from bench.common import wait_until
from bench.procs import tree_cpu_s
from bench.scenarios import _recovery

NAME = "throughput"
HELP = "no-op jobs: enqueue and drain rates, tracebus vs RQ, Dramatiq and Celery (~10 min)"
DEFAULT_REPEAT = 3
SYSTEMS = ("tracebus", "rq", "dramatiq", "celery")


def add_arguments(parser) -> None:
    parser.add_argument("--jobs", type=int, default=None,
                        help="jobs per measurement (default 20,000 x scale)")
    parser.add_argument("--rq-fork-jobs", type=int, default=None,
                        help="jobs for RQ's forking worker, which forks per job (default jobs/20)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)}")
    parser.add_argument("--recovery-rounds", type=int, default=None,
                        help="SIGKILL probes of tracebus recovery (default: --repeat; 0 skips)")


def _drivers(names: list[str], url: str) -> list:
    import importlib

    os.environ[counter.URL_ENV] = url  # the peers' modules read it at import, as their workers do
    return [importlib.import_module(f"bench.peers.{n}_peer") for n in names]


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def _timed_rate(fn, n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0)


def _drain(ctx, driver, label: str, argvs, jobs: int, client, redis_pid: int) -> dict:
    counter.reset(client)
    launched = time.time()
    procs = [ctx.spawn(f"{_slug(label)}-{i}", argv, env=driver.worker_env(label)) for i, argv in enumerate(argvs)]

    def finished() -> bool:
        dead = [p for p in procs if not p.alive()]
        if dead:
            raise RuntimeError(f"{label}: {dead[0].name} exited:\n{dead[0].log_tail()}")
        return counter.total(client) >= jobs and driver.remaining(client) == 0

    # CPU is sampled from the first execution on (boot excluded): unlike the rates, CPU per
    # job barely moves when other processes share the machine.
    wait_until(lambda: finished() or counter.total(client) > 0, 60, what=f"{label} started")
    pids = [p.pid for p in procs]
    cpu0, redis0 = tree_cpu_s(pids), tree_cpu_s([redis_pid])
    wait_until(finished, timeout_s=60 + jobs / 50, interval_s=0.05, what=f"{label} drained")
    cpu, redis_cpu = tree_cpu_s(pids) - cpu0, tree_cpu_s([redis_pid]) - redis0
    first, last = counter.window(client)
    executed = counter.total(client)
    for p in procs:
        p.stop()
    return {"jobs": jobs, "executed": executed, "rate": jobs / (last - first),
            "with_start": jobs / (last - launched), "cpu_ms_per_1k": 1e6 * cpu / jobs,
            "redis_cpu_ms_per_1k": 1e6 * redis_cpu / jobs}


def _one_round(ctx, modules, drivers, args, client, redis_pid, enq, drains) -> None:
    for module, driver in zip(modules, drivers):
        name = module.NAME
        client.flushdb()
        rate = _timed_rate(driver.enqueue_one, args.jobs)
        enq[name]["one"].append(rate)
        ctx.step(f"{name}: one-per-call enqueue {rate:,.0f}/s")
        if module.BULK:
            client.flushdb()
            rate = _timed_rate(driver.enqueue_bulk, args.jobs)
            enq[name]["bulk"].append(rate)
            ctx.step(f"{name}: bulk enqueue ({module.BULK}) {rate:,.0f}/s")
        queued = args.jobs  # the last enqueue measurement left its jobs in the queue
        for label, argvs in driver.configs().items():
            jobs = args.rq_fork_jobs if label == getattr(module, "FORK_LABEL", None) else args.jobs
            if queued != jobs:
                client.flushdb()
                (driver.enqueue_bulk if module.BULK else driver.enqueue_one)(jobs)
            queued = 0
            result = _drain(ctx, driver, label, argvs, jobs, client, redis_pid)
            drains.setdefault(label, []).append(result)
            ctx.step(f"{label}: drained {jobs:,} at {result['rate']:,.0f}/s "
                     f"({result['with_start']:,.0f}/s with start; {result['executed']:,} executions; "
                     f"CPU {result['cpu_ms_per_1k']:,.0f} ms + Redis {result['redis_cpu_ms_per_1k']:,.0f} ms per 1k)")
        client.flushdb()


def run(args, ctx) -> dict:
    args.jobs = args.jobs or max(1, int(20_000 * args.scale))
    args.rq_fork_jobs = args.rq_fork_jobs or max(1, args.jobs // 20)
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    server = ctx.redis()
    client = redis.Redis.from_url(server.url)
    modules = _drivers(names, server.url)
    drivers = [m.Driver(server.url) for m in modules]
    enq = {m.NAME: {"one": [], "bulk": []} for m in modules}
    drains: dict[str, list[dict]] = {}
    for r in range(args.repeat):
        ctx.step(f"round {r + 1}/{args.repeat}")
        _one_round(ctx, modules, drivers, args, client, server.process.pid, enq, drains)
    rounds = args.repeat if args.recovery_rounds is None else args.recovery_rounds
    recovery = _recovery.measure(ctx, server.url, client, rounds) if rounds and "tracebus" in names else []
    from bench.scenarios import _throughput_report

    return _throughput_report.build(args, enq, drains, recovery)
