"""``api-slow-clients``: status latency for ordinary clients while hundreds of slow ones hang on.

One redis-server, a 2-process worker supervisor, and gunicorn (2 workers) of each
``--worker-classes`` in turn (default ``gevent,gthread``: the serving model and the one it
replaced). A trace job of the sample's CIDs is submitted, then per worker class:

A. **Baseline** (after 3 s of unmeasured polling): ``--pollers`` clients (default 20), each with its own keep-alive
   connection, send ``GET /api/trace/job/{id}`` every ``--interval`` s (default 0.2) for
   ``--seconds`` (default 15); latency from send to the last body byte.
B. **Slow clients**: the same while ``--slow`` connections (default 100) send their headers
   a byte every 0.2 s and ``--idle`` connections (default 100) sit silent
   (:class:`bench.slowclients.SlowClients`; a connection the server closes is reopened).

A request that takes over 5 s is an error (the client reconnects). Issue 12's target:
with 200 slow connections open, status p99 under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time

from bench import trace_support as ts
from bench.slowclients import SlowClients, percentile

NAME = "api-slow-clients"
HELP = "status p99 for other clients with 200 slow/idle connections open, gevent vs gthread (~2 min)"
DEFAULT_REPEAT = 1
#: A request slower than this counts as an error (and its client reconnects).
REQUEST_TIMEOUT_S = 5.0
#: Unmeasured polling before the baseline of each worker class.
WARMUP_S = 3.0


def add_arguments(parser) -> None:
    parser.add_argument("--slow", type=int, default=100, help="connections sending headers a byte at a time")
    parser.add_argument("--idle", type=int, default=100, help="connections sending nothing")
    parser.add_argument("--pollers", type=int, default=20, help="ordinary clients polling the status")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between a poller's requests")
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each phase")
    parser.add_argument("--worker-classes", default="gevent,gthread", help="gunicorn worker classes to compare")


def _poller(system, path, interval, deadline, gate, out, rng):
    conn = system.conn(timeout=REQUEST_TIMEOUT_S)
    gate.wait()
    time.sleep(rng.random() * interval)
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        try:
            status, _ = system.http("GET", path, conn=conn)
            if status == 200:
                out["latencies"].append(time.perf_counter() - t0)
            else:
                out["errors"].append(f"HTTP {status}")
        except Exception as e:  # a timeout or a reset: count it, reconnect
            out["errors"].append(f"{type(e).__name__}: {e}")
            conn.close()
            conn = system.conn(timeout=REQUEST_TIMEOUT_S)
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    conn.close()


def _phase(system, job_id, args) -> dict:
    out: dict = {"latencies": [], "errors": []}
    gate, rng = threading.Event(), random.Random(12)
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=_poller, daemon=True,
                                args=(system, f"/api/trace/job/{job_id}", args.interval, deadline, gate, out,
                                      random.Random(rng.random())))
               for _ in range(args.pollers)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    gate.set()
    for t in threads:
        t.join(timeout=args.seconds + 2 * REQUEST_TIMEOUT_S)
    lat = [x * 1000 for x in out["latencies"]]
    return {"n": len(lat), "rps": len(lat) / (time.monotonic() - t0), "p50": percentile(lat, 0.5),
            "p95": percentile(lat, 0.95), "p99": percentile(lat, 0.99), "max": max(lat) if lat else None,
            "mean": statistics.mean(lat) if lat else None, "errors": len(out["errors"]),
            "error_samples": out["errors"][:5]}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _measure(ctx, db, cids, worker_class: str, args) -> dict:
    system = ts.System(ctx, db, processes=2, tag=f"-{worker_class}", api_env={"TRACEBUS_API_WORKER_CLASS": worker_class})
    try:
        job_id, _, _ = ts.submit(system, cids)
        # Warm-up, not measured: each gunicorn worker opens its Redis connections (one per
        # request in flight at once) and the job's first units start.
        _phase(system, job_id, argparse.Namespace(**{**vars(args), "seconds": WARMUP_S}))
        ctx.step(f"{worker_class}: job {job_id} submitted; baseline, {args.pollers} pollers for {args.seconds:g} s")
        base = _phase(system, job_id, args)
        ctx.step(f"{worker_class}: baseline p50 {_fmt(base['p50'])} / p99 {_fmt(base['p99'])} ms, "
                 f"errors {base['errors']}; opening {args.slow} slow + {args.idle} idle connections")
        with SlowClients("127.0.0.1", system.port, slow=args.slow, idle=args.idle) as load:
            slow = _phase(system, job_id, args)
            samples = load.open_samples
            slow.update(open_min=min(samples), open_mean=statistics.mean(samples), reopened=load.closed_by_server)
        ctx.step(f"{worker_class}: with slow clients p50 {_fmt(slow['p50'])} / p99 {_fmt(slow['p99'])} ms, "
                 f"errors {slow['errors']} {slow['error_samples'][:2]}; slow/idle connections open: min "
                 f"{slow['open_min']}, mean {slow['open_mean']:.0f}; {slow['reopened']} reopened after the "
                 "server closed them")
        state = json.loads(system.http("GET", f"/api/trace/job/{job_id}")[1])["state"]
        return {"baseline": base, "slow": slow, "job_state": state}
    finally:
        for proc in (system.api, system.supervisor):
            if proc is not None:
                proc.stop()


def run(args, ctx) -> dict:
    db = ts.sample_db(args.scale, ctx.step)
    cids = ts.trace_cids(db)
    classes = [c.strip() for c in args.worker_classes.split(",") if c.strip()]
    results = {wc: _measure(ctx, db, cids, wc, args) for wc in classes}

    targets, rows, rows_open = [], [], []
    for wc, res in results.items():
        for phase, label in (("baseline", "no slow clients"),
                             ("slow", f"{args.slow} slow + {args.idle} idle connections")):
            r = res[phase]
            rows.append([wc, label, f"{r['n']:,}", f"{r['rps']:.0f}", _fmt(r["p50"]), _fmt(r["p95"]),
                         _fmt(r["p99"]), _fmt(r["max"]), str(r["errors"])])
    if "gevent" in results:
        r = results["gevent"]["slow"]
        targets.append({"name": f"status p99 for other clients with {args.slow + args.idle} slow connections open "
                                "(gunicorn gevent, 2 workers; issue 12)", "target": "< 50 ms",
                        "measured": f"{_fmt(r['p99'])} ms (p50 {_fmt(r['p50'])}; {r['n']:,} requests, "
                                    f"errors {r['errors']})",
                        "met": r["p99"] is not None and r["p99"] < 50 and r["errors"] == 0})
    for wc, res in results.items():
        r = res["slow"]
        rows_open.append([wc, str(r["open_min"]), f"{r['open_mean']:.0f}", str(r["reopened"])])
    tables = [{"title": f"GET /api/trace/job/{{id}} latency, {args.pollers} pollers x 1 per {args.interval:g} s (ms)",
               "columns": ["worker class", "phase", "n", "req/s", "p50", "p95", "p99", "max", "errors"],
               "rows": rows},
              {"title": "Slow and idle connections during phase B",
               "columns": ["worker class", "open (min)", "open (mean)", "closed by the server and reopened"],
               "rows": rows_open}]
    notes = [f"{len(cids):,}-CID trace job submitted per worker class (state at the end: "
             + ", ".join(f"{wc} {res['job_state']}" for wc, res in results.items()) + ").",
             "Slow connections send 'GET /healthz' with a 4 KB header one byte every 0.2 s; gunicorn's gevent "
             "worker closes one that has not finished its headers within TRACEBUS_API_KEEPALIVE_SECONDS (5 s), "
             "and the load generator reopens it at once, so the count stays near the nominal figure.",
             f"A poller request slower than {REQUEST_TIMEOUT_S:g} s is an error (then it reconnects).",
             "Errors: " + "; ".join(f"{wc}: {res['slow']['error_samples'][:3]}" for wc, res in results.items())]
    return {"summary": f"gunicorn 2 workers of each class; {args.pollers} pollers; {args.slow} slow-header and "
                       f"{args.idle} idle connections; 2 tracebus workers.",
            "targets": targets, "tables": tables, "notes": notes, "data": results}
