"""``scaling``: the trace at 1, 2 and 4 worker processes and at scale 0.1 / 0.5 / 1.0 of the data.

Each point is a fresh redis-server, supervisor and gunicorn; the TMTT trace CID set of the
sample at that scale is submitted over HTTP and polled to completion (no ``/stream``
read, so the time is the job's). The per-job in-flight window
(``TRACE_JOB_MAX_INFLIGHT_UNITS``) is set to the number of workers, so every worker has a
unit to run. Reported per point: wall time, rows/s, peak RSS of the largest worker and of
the supervisor, and Redis ``used_memory`` peak. The machine has 2 cores, so 4 workers
measure oversubscription, not more CPU.
"""

from __future__ import annotations

from bench import trace_plots
from bench import trace_support as ts
from bench.common import fmt_stat, summarize

NAME = "scaling"
HELP = "the trace at 1/2/4 workers and at scale 0.1/0.5/1.0: time and peak RSS growth (~4 min)"
DEFAULT_REPEAT = 1


def add_arguments(parser) -> None:
    parser.add_argument("--processes-list", default="1,2,4", help="worker counts at the full scale (default 1,2,4)")
    parser.add_argument("--scales", default="0.1,0.5,1.0",
                        help="data scales, as fractions of --scale, at 2 workers (default 0.1,0.5,1.0)")


def _point(ctx, db, cids, processes, tag) -> dict:
    system = ts.System(ctx, db, processes=processes, tag=tag)
    out = ts.run_http_job(ctx, system, cids, label=f"{len(cids):,} CIDs, {processes} workers",
                          stream=False, first_page=False)
    system.stop()
    return out


def run(args, ctx) -> dict:
    procs_list = [int(x) for x in args.processes_list.split(",")]
    scales = sorted(float(x) * args.scale for x in args.scales.split(","))
    points: dict[tuple[float, int], list[dict]] = {}
    for scale in scales:
        db = ts.sample_db(scale, ctx.step)
        cids = ts.trace_cids(db)
        ctx.step(f"scale {scale:g}: {len(cids):,} trace CIDs")
        procs_here = procs_list if scale == max(scales) else [2]
        for r in range(args.repeat):
            for p in procs_here:
                points.setdefault((scale, p), []).append(_point(ctx, db, cids, p, f"-s{scale:g}-p{p}-{r}"))
    rows = []
    plot: dict[str, list] = {}
    for (scale, p), runs in sorted(points.items()):
        t = summarize([o["wall_s"] for o in runs])
        last = runs[-1]
        nrows = last["rows"]
        worker = max(o["peaks_mb"]["workers"] for o in runs)
        rows.append([f"{scale:g}", f"{last['cids']:,}", p, f"{nrows:,}", fmt_stat(t, 1),
                     f"{nrows / t['median']:,.0f}", f"{worker:.0f}",
                     f"{max(o['peaks_mb']['supervisor'] for o in runs):.0f}",
                     f"{max(o['redis_used_peak_mb'] for o in runs):,.0f}"])
        plot.setdefault(f"{p} worker{'s' if p > 1 else ''}", []).append((last["cids"], t["median"], worker))
    image = trace_plots.scaling(plot, args.out / f"{NAME}-{ctx.date}.png",
                                "tracebus trace jobs: time and peak worker RSS vs job size")
    full = {p: points[(max(scales), p)] for p in procs_list if (max(scales), p) in points}
    notes = []
    if 1 in full and 2 in full:
        t1 = full[1][-1]["wall_s"]
        t2 = full[2][-1]["wall_s"]
        notes.append(f"Full scale: 2 workers are {t1 / t2:.2f}x as fast as 1 worker"
                     + (f", 4 workers {t1 / full[4][-1]['wall_s']:.2f}x" if 4 in full else "")
                     + " (2 cores, shared with other sessions' work).")
    two = sorted((k[0], v[-1]) for k, v in points.items() if k[1] == 2)
    if len(two) >= 2:
        (_, a), (_, b) = two[0], two[-1]
        notes.append(f"At 2 workers, {b['cids'] / a['cids']:.1f}x the CIDs took {b['wall_s'] / a['wall_s']:.1f}x "
                     f"the time, and the peak worker RSS went from {a['peaks_mb']['workers']:.0f} to "
                     f"{b['peaks_mb']['workers']:.0f} MB: memory is bounded by the chunk, not by the job.")
    notes.append("TRACE_JOB_MAX_INFLIGHT_UNITS is set to max(2, workers) for every point; with the default (2) "
                 "a single job can keep at most 2 workers busy, so 4 workers would not help one job.")
    return {"summary": "Each point: fresh Redis + supervisor + gunicorn; submit over HTTP, poll to completion.",
            "tables": [{"title": "Time and peak RSS by job size and worker count",
                        "columns": ["scale", "CIDs", "workers", "rows", "wall s", "rows/s", "peak worker RSS MB",
                                    "supervisor MB", "Redis used_memory peak MB"], "rows": rows}],
            "images": [str(image)], "notes": notes,
            "data": {f"{k[0]:g}x{k[1]}": [{x: y for x, y in o.items() if x not in ("rss_series", "used_series")}
                                          for o in v] for k, v in points.items()}}
