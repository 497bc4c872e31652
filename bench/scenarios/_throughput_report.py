"""Tables, ratios and target checks of the ``throughput`` scenario (issue 2's targets)."""

from __future__ import annotations

from bench.common import fmt_num, fmt_stat, summarize

DRAIN_MIN = 10_000
DRAIN_VS_DRAMATIQ = 2.0
ONE_MIN = 8_000
BULK_MIN = 50_000
RECOVERY_MAX_S = 2.0


def _ratio(ours: float | None, theirs: float | None) -> str:
    if not ours or not theirs:
        return "-"
    return f"{ours / theirs:.1f}x"


def _median(stat: dict) -> float | None:
    return stat["median"] if stat and stat["n"] else None


def _target(name, required, measured, met) -> dict:
    return {"name": name, "target": required, "measured": measured, "met": met}


def build(args, enq: dict, drains: dict, recovery: list[dict]) -> dict:
    one = {s: summarize(v["one"]) for s, v in enq.items()}
    bulk = {s: summarize(v["bulk"]) for s, v in enq.items()}
    drain = {label: summarize([r["rate"] for r in rs]) for label, rs in drains.items()}
    with_start = {label: summarize([r["with_start"] for r in rs]) for label, rs in drains.items()}
    tb_label = next((label for label in drain if label.startswith("tracebus")), None)
    tb_one, tb_bulk = _median(one.get("tracebus")), _median(bulk.get("tracebus"))
    tb_drain = _median(drain.get(tb_label)) if tb_label else None

    enqueue_rows = [[s, fmt_stat(one[s]), _ratio(tb_one, _median(one[s])),
                     fmt_stat(bulk[s]) if bulk[s]["n"] else "no bulk API",
                     _ratio(tb_bulk, _median(bulk[s]))] for s in enq]
    cpu = {label: summarize([r["cpu_ms_per_1k"] for r in rs]) for label, rs in drains.items()}
    redis_cpu = {label: summarize([r["redis_cpu_ms_per_1k"] for r in rs]) for label, rs in drains.items()}
    drain_rows = [[label, fmt_num(drains[label][0]["jobs"]), fmt_stat(drain[label]),
                   fmt_stat(with_start[label]), _ratio(tb_drain, _median(drain[label])),
                   fmt_stat(cpu[label]), fmt_stat(redis_cpu[label])]
                  for label in drains]

    targets = []
    if tb_drain is not None:
        targets.append(_target("tracebus drain, 2 processes", f">= {DRAIN_MIN:,} jobs/s",
                               f"{tb_drain:,.0f} jobs/s", tb_drain >= DRAIN_MIN))
    dramatiq = {label: _median(s) for label, s in drain.items() if label.startswith("Dramatiq")}
    if tb_drain is not None and dramatiq:
        best_label = max(dramatiq, key=dramatiq.get)
        ratio = tb_drain / dramatiq[best_label]
        targets.append(_target("drain vs Dramatiq's best configuration", f">= {DRAIN_VS_DRAMATIQ:.0f}x",
                               f"{ratio:.2f}x ({best_label}: {dramatiq[best_label]:,.0f} jobs/s)",
                               ratio >= DRAIN_VS_DRAMATIQ))
    if tb_one is not None:
        targets.append(_target("enqueue, one message per call", f">= {ONE_MIN:,} jobs/s",
                               f"{tb_one:,.0f} jobs/s", tb_one >= ONE_MIN))
    if tb_bulk is not None:
        targets.append(_target("bulk enqueue (send_many)", f">= {BULK_MIN:,} jobs/s",
                               f"{tb_bulk:,.0f} jobs/s", tb_bulk >= BULK_MIN))
    rec = summarize([r["seconds"] for r in recovery])
    if recovery:
        targets.append(_target("recovery: a SIGKILLed worker's message runs again elsewhere",
                               f"<= {RECOVERY_MAX_S:.0f} s", f"{fmt_stat(rec, 3)} s", rec["median"] <= RECOVERY_MAX_S
                               and rec["max"] <= RECOVERY_MAX_S))

    tables = [
        {"title": "Enqueue (jobs/s, median (min-max))",
         "columns": ["System", "one per call", "tracebus / this", "bulk", "tracebus / this"],
         "rows": enqueue_rows},
        {"title": "Drain with 2 worker processes (jobs/s, median (min-max))",
         "columns": ["Configuration", "jobs", "drain (first to last task)", "including worker start",
                     "tracebus / this", "worker CPU ms / 1k jobs", "Redis CPU ms / 1k jobs"],
         "rows": drain_rows},
    ]
    if recovery:
        tables.append({"title": "Recovery after SIGKILL (seconds from the kill to the message running again)",
                       "columns": ["rounds", "median", "min", "max"],
                       "rows": [[rec["n"], f"{rec['median']:.3f}", f"{rec['min']:.3f}", f"{rec['max']:.3f}"]]})
    notes = [
        f"{args.jobs:,} no-op jobs per measurement ({args.rq_fork_jobs:,} for RQ's forking worker, "
        "which forks a process per job); median of "
        f"{args.repeat} rounds, systems interleaved within each round, one redis-server for all.",
        "Drain: the queue is filled first (bulk API where there is one), then the workers start. "
        "Done = the system's queue is empty (waiting + unacked) and the task bodies counted every job. "
        "'drain' is jobs / (last task - first task); 'including worker start' is jobs / "
        "(last task - worker launch).",
        "Every system's no-op task does the same thing: bench.counter.tick() (an in-process count "
        "flushed by a thread; RQ's forking horse writes it directly, since it exits after the job).",
        "CPU per 1,000 jobs: user + system seconds of the workers' process trees (reaped children "
        "included) and of redis-server, from the first execution to the end of the drain. It is the "
        "cost of a job, and unlike the rates it hardly changes when other processes share the machine.",
        "Dramatiq and Celery have no bulk enqueue API (group() sends one message at a time).",
    ]
    extra = [f"{label}: {r['executed']:,} executions for {r['jobs']:,} jobs"
             for label, rs in drains.items() for r in rs if r["executed"] != r["jobs"]]
    notes.append("Executions counted = jobs in every drain." if not extra else
                 "Executions above the job count (at-least-once redeliveries): " + "; ".join(extra))
    return {"summary": f"tracebus drains {fmt_num(tb_drain)} no-op jobs/s with 2 processes; "
                       f"enqueues {fmt_num(tb_one)}/s one per call and {fmt_num(tb_bulk)}/s in bulk.",
            "targets": targets, "tables": tables, "notes": notes,
            "data": {"enqueue": enq, "drain": drains, "recovery": recovery}}
