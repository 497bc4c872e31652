"""Where a trace job's CPU goes beyond its reads: every unit of the 114K job run in one process.

``python -m bench.unit_costs [--scale 1.0] [--domains history,materials,...]`` reads the job's
own statements bare (no queue, no Redis: the 1,000-CID units and the jobs domain's one scan), then
runs every unit of the same job in turn in this process with the real runner and unit code on a
private redis-server (as a worker would, minus the queue), and prints JSON: CPU and wall seconds
per domain for both, CPU seconds per step of the job (each step timed where it is called), and
Redis's own CPU. CPU seconds are the steadier figure on a shared host (issue 39, item 4).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

#: The job's steps beyond the statements, timed where they are called: (module, owner, name, label).
STEPS = (
    ("tracebus.jobs.results", None, "encode_chunk", "encode a chunk (msgpack + deflate)"),
    ("tracebus.jobs.chunkcodec", None, "_deflate", "deflate"),
    ("tracebus.jobs.results", "ChunkWriter", "_store", "store a chunk (encode + fence + SET)"),
    ("tracebus.jobs.results", "ChunkWriter", "commit", "commit (last chunk + manifest)"),
    ("tracebus.jobs.store", "JobStore", "begin_unit", "begin"),
    ("tracebus.jobs.store", "JobStore", "finish_unit", "settle"),
    ("tracebus.jobs.runner", None, "refill", "refill (the user's jobs, take, send)"),
    ("tracebus.jobs.runner", None, "summarize", "progress summary"),
    ("tracebus.jobs.reads", "JobReads", "load_input", "load the unit's input"),
    ("tracebus.trace.events.jobs_domain", None, "_scan", "jobs scan (read, route, parts)"),
    ("tracebus.trace.events.jobs_domain", None, "_write_parts", "jobs parts -> unit rows"),
)


def _timed(cpu: dict, label: str, fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu[label] += time.process_time() - c0
    return run


def _instrument(cpu: dict) -> None:
    import importlib

    for module, owner, name, label in STEPS:
        target = importlib.import_module(module)
        if owner is not None:
            target = getattr(target, owner)
        setattr(target, name, _timed(cpu, label, getattr(target, name)))


def bare(source, cids: list[str], domains) -> dict:
    from tracebus.trace.events.jobs_domain import scan_jobs

    out = {}
    for domain in domains:
        w0, c0 = time.perf_counter(), time.process_time()
        if domain == "jobs":
            for _ in scan_jobs(source, cids, 5000):
                pass
        else:
            for start in range(0, len(cids), 1000):
                for _ in source.fetch(domain, cids[start:start + 1000], 5000):
                    pass
        out[domain] = {"wall_s": round(time.perf_counter() - w0, 2), "cpu_s": round(time.process_time() - c0, 2)}
    return out


def job(service, broker, settings, source, cids: list[str], domains) -> dict:
    from tracebus.jobs import runner
    from tracebus.jobs.dispatch import Dispatcher
    from tracebus.trace.events.kind import EVENTS
    from tracebus.trace.runtime import Runtime, TraceUnit

    req = service.parse({"profile": "query_tool", "container_ids": cids, "domains": list(domains)}, "bench")
    job_id = service.submit(req)  # its first units wait in the queue: this process runs them all
    store = service.store
    runner.bind(store, Dispatcher(broker, store))
    rt = Runtime(settings, source)
    plan = store.plan(job_id)
    out = {}
    for domain in domains:
        w0, c0 = time.perf_counter(), time.process_time()
        for unit in plan.units_of(domain):
            runner.run_unit(lambda ctx: EVENTS.run_unit(TraceUnit(ctx, rt)), job_id, unit)
        out[domain] = {"wall_s": round(time.perf_counter() - w0, 2), "cpu_s": round(time.process_time() - c0, 2)}
    state = service.status(job_id)["state"]
    if state != "completed":
        raise RuntimeError(f"job {job_id} ended {state}")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.unit_costs", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--domains", default="history,materials,rejects,holds,jobs")
    args = parser.parse_args(argv)
    from api.settings import ApiSettings
    from bench import trace_support as ts
    from tracebus.engine.actor import set_broker
    from tracebus.engine.broker import Broker
    from tracebus.redis_proc import RedisServer
    from tracebus.trace.service import TraceService
    from tracebus.trace.sources.sqlite import SqliteSource

    db = ts.sample_db(args.scale)
    cids, domains = ts.trace_cids(db), tuple(args.domains.split(","))
    cpu: dict = collections.defaultdict(float)
    _instrument(cpu)
    server = RedisServer(Path(tempfile.mkdtemp(prefix="unit-costs-")) / "redis").start()
    try:
        settings = ApiSettings.from_env({"TRACEBUS_SQLITE_PATH": str(db), "TRACE_ASYNC_CID_THRESHOLD": "500",
                                         "TRACE_USER_MAX_INFLIGHT": "50"}, redis_url=server.url, key_prefix="uc")
        broker = Broker(settings)
        set_broker(broker)
        source = SqliteSource(db)
        out = {"bare": bare(source, cids, domains)}
        out["job"] = job(TraceService(settings, broker), broker, settings, source, cids, domains)
        for side in ("bare", "job"):
            out[side]["total"] = {k: round(sum(d[k] for d in out[side].values()), 2) for k in ("wall_s", "cpu_s")}
        out["job_steps_cpu_s"] = {k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])}
        info = broker.client.info("cpu")
        out["redis_cpu_s"] = round(info["used_cpu_user"] + info["used_cpu_sys"], 2)
        out["redis_commands"] = sum(v["calls"] for v in broker.client.info("commandstats").values())
        print(json.dumps(out, indent=1))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
