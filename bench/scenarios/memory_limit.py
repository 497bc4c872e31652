"""``memory-limit``: the 114K-CID trace with every worker capped at 256 MB, vs the RQ original.

1. tracebus uncapped (2 workers): the reference row multiset digest (read via ``/stream``).
2. tracebus with each worker's address space capped at 256 MiB (``RLIMIT_AS``, set in the
   worker right after fork by the boot hook :mod:`bench.memcap`): it must complete with
   the same digest, no failed unit and no worker replaced.
3. The RQ original (one job, every domain in memory, one JSON value) and the RQ job with
   5,000-CID chunks, each in a SimpleWorker under the same 256 MiB cap: how they end.

Mechanism: this machine has cgroup v1 only for memory (the v2 hierarchy has no memory
controller, so no ``memory.max``) and its memory cgroups belong to the session machinery,
so the cap is ``RLIMIT_AS``. It bounds virtual memory, which is stricter than an RSS or
cgroup limit (libraries, thread stacks and reserved malloc arenas count); an allocation
past it raises MemoryError rather than an OOM kill.
"""

from __future__ import annotations

import threading
import time

from bench import trace_plots
from bench import trace_support as ts

NAME = "memory-limit"
HELP = "the 114K trace with workers capped at 256 MB (RLIMIT_AS): tracebus vs the RQ original (~6 min)"
DEFAULT_REPEAT = 1


def add_arguments(parser) -> None:
    parser.add_argument("--cap-mb", type=int, default=256, help="per-worker cap, MiB (default 256)")
    parser.add_argument("--processes", type=int, default=2, help="tracebus worker processes (default 2)")


def _pid_watch(system: ts.System, stop: threading.Event, seen: set) -> None:
    while not stop.is_set():
        for p in system.supervisor.children():
            seen.add(p.pid)
        stop.wait(0.2)


def _tracebus(ctx, db, cids, args, capped: bool) -> dict:
    env = {ts.MEMCAP_ENV: str(args.cap_mb), **ts.CAP_ENV} if capped else {}
    label = f"tracebus, workers capped at {args.cap_mb} MiB" if capped else "tracebus, uncapped"
    system = ts.System(ctx, db, processes=args.processes, worker_env=env, extra_modules=["bench.memcap"],
                       tag="-capped" if capped else "-free")
    seen: set = set()
    stop = threading.Event()
    watcher = threading.Thread(target=_pid_watch, args=(system, stop, seen), daemon=True)
    watcher.start()
    out = ts.run_http_job(ctx, system, cids, label=label, first_page=False)
    stop.set()
    watcher.join()
    if capped:  # the cap really is in force in the workers
        limits = []
        for p in system.supervisor.children():
            limits.append(p.rlimit(__import__("psutil").RLIMIT_AS)[0] // ts.MB)
        out["worker_rlimit_as_mb"] = limits
        ctx.step(f"{label}: RLIMIT_AS of the live workers: {limits} MiB")
    out["worker_pids"] = sorted(seen)
    out["workers_replaced"] = max(0, len(seen) - args.processes)
    log = system.supervisor.log_tail(200_000)
    out["memory_errors_in_log"] = log.count("MemoryError")
    system.stop()
    return out


def run(args, ctx) -> dict:
    db = ts.sample_db(args.scale, ctx.step)
    cids = ts.trace_cids(db)
    ctx.step(f"sample {db.name}: {len(cids):,} trace CIDs; cap {args.cap_mb} MiB per worker (RLIMIT_AS)")
    free = _tracebus(ctx, db, cids, args, capped=False)
    capped = _tracebus(ctx, db, cids, args, capped=True)
    rq_redis = ctx.redis("--proto-max-bulk-len", "2gb", "--client-query-buffer-limit", "2gb")
    orig = ts.run_rq(ctx, rq_redis.url, "bench.rq_trace.original_job",
                     (str(db), cids, list(ts.DOMAINS), "rqtrace:original:result"), args.cap_mb,
                     f"RQ original capped at {args.cap_mb} MiB", timeout_s=900, env=ts.CAP_ENV)
    chunked = ts.run_rq(ctx, rq_redis.url, "bench.rq_trace.chunked_job",
                        (str(db), cids, list(ts.DOMAINS), "rqtrace:chunked"), args.cap_mb,
                        f"RQ chunked capped at {args.cap_mb} MiB", timeout_s=900, env=ts.CAP_ENV)
    rq_redis.stop()

    same = free["stream"]["digest"] == capped["stream"]["digest"]
    completed = capped["state"] == "completed"
    failed_units = (capped["status_doc"].get("progress") or {}).get("units_failed")
    targets = [{"name": f"tracebus completes with every worker capped at {args.cap_mb} MiB (issue 5)",
                "target": "completed, identical result",
                "measured": f"{capped['state']}, digest {'equal' if same else 'DIFFERENT'} "
                            f"({capped['stream']['rows']:,} rows), failed units {failed_units}, "
                            f"workers replaced {capped['workers_replaced']}",
                "met": completed and same}]

    def rq_row(r):
        if r["status"] == "finished":
            how = f"finished, {r['result']['rows']:,} rows"
        else:
            how = f"{r['status']}: {r.get('error')}"
        return [r["label"], how, f"{r['wall_s']:.1f}", f"{r['peak_rss_mb']:,.0f}", f"exit {r['exit_code']}"]

    rows = [[free["label"], f"{free['state']}, {free['stream']['rows']:,} rows", f"{free['wall_s']:.1f}",
             f"{free['peaks_mb']['workers']:.0f}", free["stream"]["digest"]],
            [capped["label"], f"{capped['state']}, {capped['stream']['rows']:,} rows", f"{capped['wall_s']:.1f}",
             f"{capped['peaks_mb']['workers']:.0f}", capped["stream"]["digest"]],
            rq_row(orig), rq_row(chunked)]
    tables = [{"title": f"The {len(cids):,}-CID trace under a {args.cap_mb} MiB per-worker cap",
               "columns": ["system", "outcome", "wall s", "peak RSS of the largest worker MB", "digest / exit"],
               "rows": rows}]
    curves = [("tracebus uncapped, largest worker", trace_plots.label_series(free["rss_series"], "workers")),
              (f"tracebus capped {args.cap_mb} MiB, largest worker",
               trace_plots.label_series(capped["rss_series"], "workers")),
              (f"RQ original capped {args.cap_mb} MiB", trace_plots.label_series(orig["rss_series"], "worker")),
              (f"RQ chunked capped {args.cap_mb} MiB", trace_plots.label_series(chunked["rss_series"], "worker"))]
    image = trace_plots.rss_over_time(curves, args.out / f"{NAME}-rss-{ctx.date}.png",
                                      f"RSS over time under a {args.cap_mb} MiB RLIMIT_AS per worker",
                                      limit_mb=args.cap_mb, log=False)
    notes = [
        "Cap mechanism: RLIMIT_AS (virtual address space) of each worker process, set after fork by a boot "
        "hook (bench/memcap.py) for tracebus and before exec of `rq worker` for RQ. cgroup v2 memory.max is "
        "not available here (cgroup v1 hybrid; the v2 hierarchy has no memory controller) and the v1 memory "
        "cgroups belong to the session machinery. RLIMIT_AS counts virtual memory, so it is stricter than "
        "memory.max would be: a process passes it only if its whole address space stays under the cap. "
        "Every capped process (tracebus workers and RQ workers alike) runs with MALLOC_ARENA_MAX=2, so glibc's "
        "64 MiB per-thread arena reservations do not count against threaded programs; thread stacks (8 MiB "
        "reserved each) still do. An RQ worker whose CPU time stops moving for 45 s is declared hung and stopped "
        "(a thread pool whose thread cannot start waits forever).",
        f"Live tracebus workers' RLIMIT_AS during the capped run: {capped.get('worker_rlimit_as_mb')} MiB; "
        f"MemoryError lines in the capped supervisor log: {capped['memory_errors_in_log']}.",
        "The RQ runs' outcome is read from RQ's job record (status and the last line of exc_info): on a "
        "MemoryError RQ marks the job failed, stores nothing, and the burst worker exits.",
    ]
    for r in (orig, chunked):
        if r.get("log_tail") and r["status"] != "finished":
            notes.append(f"{r['label']}: end of its worker log: `{r['log_tail'][-300:].strip().splitlines()[-1]}`")
    return {"summary": f"{len(cids):,}-CID trace (scale {args.scale:g}), {args.processes} tracebus workers, "
                       f"cap {args.cap_mb} MiB per worker process.",
            "targets": targets, "tables": tables, "images": [str(image)], "notes": notes,
            "data": {"uncapped": free, "capped": capped, "rq_original": orig, "rq_chunked": chunked,
                     "ts": time.time()}}
