"""``tracebus status [--json] [--watch [SECONDS]]``: queues, the source's sessions, live workers
and jobs at a glance."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from collections import Counter

from tracebus.engine.broker import Broker
from tracebus.engine.registry import WorkerRegistry
from tracebus.jobs.states import ACTIVE_STATES, STATES
from tracebus.commands._common import fmt_bytes, fmt_duration, known_queues, print_json, table

#: Job states in the order they are shown (``partial`` is reported as completed by the API).
JOB_STATES = STATES
#: Active jobs listed under the counts.
ACTIVE_SHOWN = 10


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="show queues, live workers and jobs",
                       description="Show each queue (length, pending, delayed, dead), the sessions the "
                                   "workers hold against the source (in use, units waiting, the cap), "
                                   "the live workers "
                                   "(host, pid, current message, RSS, uptime, messages done) and the "
                                   "jobs by status, with the active ones.")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (one per refresh with --watch)")
    p.add_argument("--watch", nargs="?", type=float, const=2.0, default=None, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) until Ctrl-C")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from tracebus.jobs.store import JobStore
    from tracebus.trace.sources.control import session_places

    if args.watch is not None and args.watch <= 0:
        print("tracebus status: --watch needs a positive number of seconds", file=sys.stderr)
        return 2
    broker = Broker(settings)
    store = JobStore(broker.client, settings)
    try:
        while True:
            doc = {"redis": {"url": masked(settings.redis_url),
                             "source": getattr(args, "redis_source", "REDIS_URL")}, **collect(broker, store),
                   "source_sessions": sessions(session_places(broker.client, settings))}
            if args.json:
                if args.watch is None:
                    print_json(doc)
                else:
                    print(json.dumps(doc, default=str), flush=True)
            else:
                if args.watch is not None and sys.stdout.isatty():
                    sys.stdout.write("\x1b[H\x1b[2J")  # clear the screen between refreshes
                print(render(doc), flush=True)
            if args.watch is None:
                return 0
            time.sleep(args.watch)
    finally:  # Ctrl-C ends --watch as it ends every command: exit 130 (cli.main)
        broker.close()


def collect(broker: Broker, store) -> dict:
    """The status document: ``queues``, ``paused`` (queue names), ``workers``, ``jobs`` (counts)
    and ``active_jobs``."""
    now = time.time()
    queues = [broker.queue_stats(q) for q in known_queues(broker)]
    workers = []
    for w in WorkerRegistry(broker).list():
        started = int(w.get("started_ms") or 0) / 1000
        workers.append({"host": w.get("host"), "pid": int(w.get("pid") or 0), "consumer": w.get("consumer"),
                        "queues": w.get("queues"), "current": w.get("current") or None,
                        "rss_bytes": int(w.get("rss_bytes") or 0), "done": int(w.get("done") or 0),
                        "uptime_seconds": round(now - started, 1) if started else None})
    jobs = store.list_jobs(limit=1 << 30)["jobs"]
    counts = Counter(j["status"] for j in jobs)  # the generic view: status is the internal state
    active = [j for j in jobs if j["status"] in ACTIVE_STATES][:ACTIVE_SHOWN]
    return {"time": round(now, 3), "queues": queues, "paused": sorted(broker.paused_queues()), "workers": workers,
            "jobs": {state: counts.get(state, 0) for state in JOB_STATES},
            "active_jobs": [{"job_id": j["job_id"], "state": j["status"], "user": j["user"],
                             "progress": j["progress"], "elapsed_seconds": j["elapsed_seconds"],
                             "estimated_remaining_seconds": j["estimated_remaining_seconds"]}
                            for j in active]}


def sessions(places) -> dict:
    """The source's sessions now: ``in_use``, ``waiting`` (units waiting for one) and ``max`` (the
    cap the workers take places under, this process's setting when none has lately)."""
    usage = places.usage()
    return {"in_use": usage.in_use, "waiting": usage.waiting, "max": usage.capacity or places.capacity}


def masked(url: str) -> str:
    """``url`` with its password replaced by ``***`` (it is printed)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def render(doc: dict) -> str:
    """The text view of :func:`collect`'s document (with the ``redis`` it was read from)."""
    out = []
    if "redis" in doc:
        out += [f"REDIS {doc['redis']['url']} (from {doc['redis']['source']})", ""]
    out += ["QUEUES", table(("queue", "waiting", "running", "delayed", "dead"),  # as `queues` names them
                           [(q["queue"] + (" (paused)" if q["queue"] in doc.get("paused", ()) else ""),
                             q["length"], q["pending"], q["delayed"], q["dead"])
                            for q in doc["queues"]]), ""]
    if "source_sessions" in doc:
        s = doc["source_sessions"]
        out += [f"SOURCE SESSIONS  {s['in_use']} in use of {s['max']}, {s['waiting']} units waiting", ""]
    out.append(f"WORKERS ({len(doc['workers'])} live)")
    if doc["workers"]:
        out.append(table(("host", "pid", "current", "rss", "uptime", "done"),
                         [(w["host"], w["pid"], w["current"] or "idle", fmt_bytes(w["rss_bytes"]),
                           fmt_duration(w["uptime_seconds"]), w["done"]) for w in doc["workers"]]))
    else:
        out.append("none (is the tracebus-worker service running?)")
    out.append("")
    out.append("JOBS  " + "  ".join(f"{state} {n}" for state, n in doc["jobs"].items()))
    if doc["active_jobs"]:
        out.append(table(("job", "state", "units", "rows", "elapsed", "eta", "user"),
                         [(j["job_id"], j["state"],
                           f"{j['progress']['units_done'] + j['progress']['units_failed']}"
                           f"/{j['progress']['units_total']}",
                           j["progress"]["rows"], fmt_duration(j["elapsed_seconds"]),
                           fmt_duration(j["estimated_remaining_seconds"]), j["user"])
                          for j in doc["active_jobs"]]))
    return "\n".join(out)
