"""``api-load``: 200 concurrent pollers of one gunicorn (2 workers) while a 114K job runs.

One redis-server, a 2-process worker supervisor and gunicorn with 2 gthread workers. The
114K-CID trace is submitted; once it runs:

1. **Pollers** (the target's measure): ``--pollers`` client threads (default 200), each
   with its own keep-alive ``http.client`` connection, each sending one request every
   ``--interval`` seconds (default 1 s, three times the dashboard's 3 s poll) for
   ``--seconds`` (default 30): ``--page-readers`` of them (default 10) read a 5,000-row
   ``partial=1`` page of history at a random committed offset, the rest
   ``GET /api/trace/job/{id}``. Latency is measured per request from send to the last
   body byte. The load is open-loop-ish (a client that falls behind does not send faster).
2. **Saturation** (context, when ``wrk`` is installed: ``apt-get install wrk``):
   ``wrk -t2 -c200`` of the status URL for 15 s, closed loop, which shows the most the API
   serves on these 2 cores and its latency when saturated.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import statistics
import subprocess
import threading
import time

from bench import trace_support as ts

NAME = "api-load"
HELP = "200 concurrent pollers and page reads while a 114K job runs: req/s, p50/p95/p99, errors (~4 min)"
DEFAULT_REPEAT = 1


def add_arguments(parser) -> None:
    parser.add_argument("--pollers", type=int, default=200, help="concurrent clients (default 200)")
    parser.add_argument("--page-readers", type=int, default=10, help="of which read pages (default 10)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a client's requests")
    parser.add_argument("--seconds", type=float, default=30.0, help="load duration (default 30)")
    parser.add_argument("--no-wrk", action="store_true", help="skip the wrk saturation step")


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _client(system, job_id, kind, interval, deadline, start_gate, out, rng):
    conn = system.conn(timeout=30)
    start_gate.wait()
    time.sleep(rng.random() * interval)  # spread the clients over the interval
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        if kind == "page":
            offset = 0
            try:
                total = out["history_total"]
                offset = rng.randrange(0, max(1, total - 5000)) if total > 5000 else 0
            except KeyError:
                pass
            path = f"/api/trace/job/{job_id}/result?domain=history&offset={offset}&limit=5000&partial=1"
        else:
            path = f"/api/trace/job/{job_id}"
        t0 = time.perf_counter()
        try:
            status, body = system.http("GET", path, conn=conn)
            latency = time.perf_counter() - t0
            if status == 200:
                out[kind].append(latency)
                if kind == "page":
                    out["history_total"] = max(out.get("history_total", 0), json.loads(body)["total"])
            else:
                out["errors"].append(f"{kind} HTTP {status}")
        except Exception as e:  # count it and reconnect
            out["errors"].append(f"{kind} {type(e).__name__}: {e}")
            conn.close()
            conn = system.conn(timeout=30)
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    conn.close()


def _pollers(ctx, system, job_id, args) -> dict:
    out: dict = {"status": [], "page": [], "errors": []}
    deadline_holder = time.monotonic() + 5 + args.seconds
    gate = threading.Event()
    rng = random.Random(5)
    threads = []
    for i in range(args.pollers):
        kind = "page" if i < args.page_readers else "status"
        threads.append(threading.Thread(target=_client, daemon=True,
                                        args=(system, job_id, kind, args.interval, deadline_holder, gate, out,
                                              random.Random(rng.random()))))
    for t in threads:
        t.start()
    t0 = time.monotonic()
    gate.set()
    for t in threads:
        t.join(timeout=args.seconds + 60)
    elapsed = time.monotonic() - t0
    res = {}
    for kind in ("status", "page"):
        lat = [x * 1000 for x in out[kind]]
        res[kind] = {"n": len(lat), "rps": len(lat) / elapsed, "p50": _pct(lat, 0.5), "p95": _pct(lat, 0.95),
                     "p99": _pct(lat, 0.99), "max": max(lat) if lat else None,
                     "mean": statistics.mean(lat) if lat else None}
    res["errors"] = len(out["errors"])
    res["error_samples"] = out["errors"][:10]
    res["seconds"] = elapsed
    ctx.step(f"pollers: status p50 {res['status']['p50']:.1f} / p95 {res['status']['p95']:.1f} / "
             f"p99 {res['status']['p99']:.1f} ms at {res['status']['rps']:.0f} req/s; pages p99 "
             f"{(res['page']['p99'] or 0):.0f} ms at {res['page']['rps']:.1f} req/s; errors {res['errors']}")
    return res


_WRK_LAT = re.compile(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$")


def _wrk(ctx, system, job_id) -> dict | None:
    wrk = shutil.which("wrk")
    if not wrk:
        ctx.step("wrk not installed: saturation step skipped (apt-get install wrk)")
        return None
    argv = [wrk, "-t2", "-c200", "-d15s", "--latency", "-H", f"X-User-Id: {ts.USER}",
            f"http://127.0.0.1:{system.port}/api/trace/job/{job_id}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    text = done.stdout
    res = {"raw": text}
    for line in text.splitlines():
        m = _WRK_LAT.match(line)
        if m:
            v = float(m.group(2)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(3)]
            res[f"p{m.group(1)}"] = v
        if line.startswith("Requests/sec:"):
            res["rps"] = float(line.split()[1])
        if "Non-2xx" in line:
            res["non_2xx"] = int(line.split()[-1])
        if line.strip().startswith("Socket errors"):
            res["socket_errors"] = line.strip()
    ctx.step(f"wrk -c200 closed loop: {res.get('rps', 0):,.0f} req/s, p50 {res.get('p50')} ms, "
             f"p99 {res.get('p99')} ms, non-2xx {res.get('non_2xx', 0)}")
    return res


def run(args, ctx) -> dict:
    db = ts.sample_db(args.scale, ctx.step)
    cids = ts.trace_cids(db)
    system = ts.System(ctx, db, processes=2)
    sampler = system.sampler()
    with sampler:
        t_submit = time.perf_counter()
        job_id, t202, _ = ts.submit(system, cids)
        ctx.step(f"submitted {len(cids):,} CIDs: 202 in {t202 * 1000:.0f} ms ({job_id})")
        ts.first_page_time(system, job_id, "history", t_submit)
        ctx.step(f"job running; {args.pollers} pollers ({args.page_readers} reading pages) for {args.seconds:g} s")
        polled = _pollers(ctx, system, job_id, args)
        state_after = json.loads(system.http("GET", f"/api/trace/job/{job_id}")[1])["state"]
        wrk = None if args.no_wrk else _wrk(ctx, system, job_id)
        state_after_wrk = json.loads(system.http("GET", f"/api/trace/job/{job_id}")[1])["state"]
        ctx.step(f"job state after the pollers: {state_after}; after wrk: {state_after_wrk}")
        doc = ts.wait_job(system, job_id)
        ctx.step(f"job {doc['state']} after {time.perf_counter() - t_submit:.1f} s")
    p99 = polled["status"]["p99"]
    targets = [
        {"name": f"status polling p99 at {args.pollers} concurrent pollers, 2 gunicorn workers, 114K job running "
                 "(issue 4)", "target": "< 20 ms",
         "measured": f"{p99:.1f} ms (p50 {polled['status']['p50']:.1f}, p95 {polled['status']['p95']:.1f}; "
                     f"{polled['status']['rps']:.0f} req/s; errors {polled['errors']})",
         "met": p99 < 20 and polled["errors"] == 0 and state_after == "running"},
        {"name": "submit 114K CIDs answers 202 (issue 4)", "target": "< 500 ms", "measured": f"{t202 * 1000:.0f} ms",
         "met": t202 < 0.5},
    ]
    rows = [[f"status GET /api/trace/job/{{id}} ({args.pollers - args.page_readers} clients, 1 per {args.interval:g} s)",
             f"{polled['status']['n']:,}", f"{polled['status']['rps']:.0f}", f"{polled['status']['p50']:.1f}",
             f"{polled['status']['p95']:.1f}", f"{polled['status']['p99']:.1f}", f"{polled['status']['max']:.1f}"],
            [f"page GET .../result 5,000 rows partial=1 ({args.page_readers} clients)", f"{polled['page']['n']:,}",
             f"{polled['page']['rps']:.1f}", f"{polled['page']['p50']:.1f}", f"{polled['page']['p95']:.1f}",
             f"{polled['page']['p99']:.1f}", f"{polled['page']['max']:.1f}"]]
    if wrk and "rps" in wrk:
        rows.append(["wrk -t2 -c200 status, closed loop 15 s (saturation)", "-", f"{wrk['rps']:,.0f}",
                     f"{wrk.get('p50', 0):.1f}", "-", f"{wrk.get('p99', 0):.1f}", "-"])
    tables = [{"title": "Latency while the 114K job runs (ms)",
               "columns": ["requests", "n", "req/s", "p50", "p95", "p99", "max"], "rows": rows},
              {"title": "Peak RSS during the load (MB, largest process of each group)",
               "columns": list(sampler.peaks_mb()), "rows": [list(sampler.peaks_mb().values())]}]
    notes = [f"Load generator: {args.pollers} Python threads in the bench process, one keep-alive http.client "
             "connection each, paced (open-loop-ish); they use little CPU at this rate. The server shares the "
             "2 cores with the 2 tracebus workers running the job, Redis, and other sessions' work.",
             f"Errors: {polled['errors']} {polled['error_samples']}",
             f"The job was '{state_after}' when the pollers stopped (the target needs it running).",
             "wrk (Debian package) measures saturation only: 200 connections sending back to back, not pollers."]
    return {"summary": f"{len(cids):,}-CID job, gunicorn 2 gthread workers x 8 threads, 2 tracebus workers.",
            "targets": targets, "tables": tables, "notes": notes,
            "data": {"pollers": polled, "wrk": wrk, "submit_s": t202, "final": doc, "peaks": sampler.peaks_mb()}}
