"""``chaos-114k``: the 114K-CID trace while a worker is SIGKILLed every few seconds.

A clean run and a chaos run (``--repeat`` pairs), each on a fresh redis-server, supervisor
and gunicorn. In
the chaos run a thread SIGKILLs one live worker (chosen at random, seeded) every
``--kill-every`` seconds from submit until the job is final; the supervisor replaces it
and the unit it held is delivered again. Reported: wall time of each, the overhead, the
number of kills, worker CPU seconds, and whether the row multiset digests (read from the
stored chunks) are equal.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import threading
import time

from bench import trace_support as ts

NAME = "chaos-114k"
HELP = "the 114K trace with a worker SIGKILLed every few seconds: overhead and identical result (~5 min)"
DEFAULT_REPEAT = 2


def add_arguments(parser) -> None:
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between SIGKILLs (default 5)")
    parser.add_argument("--processes", type=int, default=2, help="tracebus worker processes (default 2)")


def _killer(ctx, system: ts.System, every: float, stop: threading.Event, kills: list) -> None:
    rng = random.Random(11)
    while not stop.wait(every):
        workers = system.supervisor.children()
        if not workers:
            continue
        victim = rng.choice(workers)
        try:
            os.kill(victim.pid, signal.SIGKILL)
            kills.append((time.monotonic(), victim.pid))
            ctx.step(f"chaos: SIGKILL worker {victim.pid} (kill {len(kills)})")
        except ProcessLookupError:
            pass


def _one(ctx, db, cids, args, chaos: bool) -> dict:
    system = ts.System(ctx, db, processes=args.processes, tag="-chaos" if chaos else "-clean")
    kills: list = []
    stop = threading.Event()
    killer = None
    if chaos:
        killer = threading.Thread(target=_killer, args=(ctx, system, args.kill_every, stop, kills), daemon=True)
        killer.start()
    try:
        out = ts.run_http_job(ctx, system, cids, label="chaos" if chaos else "clean", first_page=False,
                              stream="redis")
    finally:
        stop.set()
        if killer:
            killer.join()
    out["kills"] = len(kills)
    system.stop()
    return out


def run(args, ctx) -> dict:
    db = ts.sample_db(args.scale, ctx.step)
    cids = ts.trace_cids(db)
    ctx.step(f"sample {db.name}: {len(cids):,} trace CIDs; SIGKILL a worker every {args.kill_every:g} s")
    clean, chaos = [], []
    for r in range(args.repeat):
        clean.append(_one(ctx, db, cids, args, chaos=False))
        chaos.append(_one(ctx, db, cids, args, chaos=True))
    c, x = clean[-1], chaos[-1]
    t_clean = statistics.median(o["wall_s"] for o in clean)
    t_chaos = statistics.median(o["wall_s"] for o in chaos)
    overhead = t_chaos / t_clean - 1
    same = {o["stream"]["digest"] for o in clean} == {o["stream"]["digest"] for o in chaos} and \
        len({o["stream"]["digest"] for o in clean + chaos}) == 1
    kills = x["kills"]
    targets = [
        {"name": "chaos: identical result (row multiset digest) (issue 5)", "target": "equal to the clean run",
         "measured": f"{'equal' if same else 'DIFFERENT'} ({x['stream']['digest']} vs {c['stream']['digest']})",
         "met": same and x["state"] == "completed"},
        {"name": "chaos: time overhead vs the clean run (issue 5)", "target": "< 25%",
         "measured": f"{overhead:+.1%} ({t_chaos:.1f} s vs {t_clean:.1f} s, {kills} SIGKILLs)",
         "met": overhead < 0.25},
    ]
    rows = [[o["label"], o["state"], f"{o['wall_s']:.1f}", f"{o['cpu_s']['workers']:.1f}", f"{o['stream']['rows']:,}",
             o["kills"],
             f"{o['peaks_mb']['workers']:.0f}", (o["status_doc"].get("progress") or {}).get("units_failed"),
             o["stream"]["digest"]] for o in clean + chaos]
    tables = [{"title": f"{len(cids):,}-CID trace, clean vs a worker SIGKILLed every {args.kill_every:g} s",
               "columns": ["run", "state", "wall s", "worker CPU s", "rows", "SIGKILLs", "peak worker RSS MB", "failed units",
                           "row multiset digest"], "rows": rows}]
    per_kill = (t_chaos - t_clean) / kills if kills else None
    cpu_clean = sum(c["cpu_s"]["workers"] for c in clean) / len(clean)
    cpu_chaos = sum(o["cpu_s"]["workers"] for o in chaos) / len(chaos)
    targets.append({"name": "chaos: worker CPU seconds vs the clean run (steadier than wall time here)",
                    "target": "(context)", "measured": f"{cpu_chaos / cpu_clean - 1:+.1%} ({cpu_chaos:.1f} vs "
                                                      f"{cpu_clean:.1f} CPU s)", "met": None})
    notes = [f"{kills} workers killed over {t_chaos:.0f} s; "
             + (f"each kill cost about {per_kill:.1f} s of wall time (a killed unit restarts from its beginning "
                "and the replacement worker boots)." if per_kill and per_kill > 0 else
                "the chaos run was not slower than the clean one: the wall-time difference is within the noise "
                "of this shared machine (see the CPU seconds)."),
             "The digest is the sum of 64-bit hashes of msgpack(domain, row) over every row of the stored result "
             "(read from the job's chunks in Redis with the library's codec), with the row count: equal multisets "
             "give equal digests, and a lost or duplicated row changes it. Rows of both runs were also checked "
             "against SQLite in trace-114k and memory-limit (same digest).",
             "Shared machine: the clean and chaos runs were minutes apart and other sessions' work ran too "
             "(load averages above)."]
    return {"summary": f"{len(cids):,}-CID trace (scale {args.scale:g}), {args.processes} workers.",
            "targets": targets, "tables": tables, "notes": notes,
            "data": {"clean": [_strip(o) for o in clean], "chaos": [_strip(o) for o in chaos]}}


def _strip(o: dict) -> dict:
    return {k: v for k, v in o.items() if k not in ("rss_series", "used_series")}
