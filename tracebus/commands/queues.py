"""``tracebus queues [list|pause|resume|purge QUEUE]``: see and control the queues.

``list`` (the default) shows each queue's waiting, running, delayed and dead messages,
whether it is paused and how many live workers read it. ``pause`` makes workers stop
taking its messages (the running ones finish; within half a second); ``resume`` undoes
it. ``purge`` deletes the messages that wait and the delayed ones (running ones finish;
dead letters stay: ``tracebus dead purge``). Exit code 2 for a queue nothing declared.
"""

from __future__ import annotations

from tracebus.engine.broker import Broker
from tracebus.engine.registry import WorkerRegistry
from tracebus.errors import InvalidParams
from tracebus.commands._common import known_queues, print_json, table


def add_parser(sub) -> None:
    p = sub.add_parser("queues", help="list queues; pause, resume or purge one",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.set_defaults(func=run_list, json=False)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    ls = actions.add_parser("list", help="the queues with their counts (the default)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_list)
    for name, func, text in (("pause", run_pause, "workers stop taking the queue's messages"),
                             ("resume", run_resume, "workers take the queue's messages again"),
                             ("purge", run_purge, "delete the waiting and delayed messages")):
        a = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        a.add_argument("queue", metavar="QUEUE")
        a.set_defaults(func=func)


def collect(broker: Broker) -> list[dict]:
    paused = broker.paused_queues()
    serving: dict[str, int] = {}
    for w in WorkerRegistry(broker).list():
        for q in (w.get("queues") or "").split(","):
            serving[q] = serving.get(q, 0) + 1
    out = []
    for q in sorted(set(known_queues(broker)) | paused):
        s = broker.queue_stats(q)
        out.append({"queue": q, "waiting": s["length"], "running": s["pending"], "delayed": s["delayed"],
                    "dead": s["dead"], "paused": q in paused, "workers": serving.get(q, 0)})
    return out


def run_list(args, settings) -> int:
    broker = Broker(settings)
    try:
        rows = collect(broker)
    finally:
        broker.close()
    if args.json:
        print_json(rows)
    else:
        print(table(("queue", "waiting", "running", "delayed", "dead", "paused", "workers"),
                    [(r["queue"], r["waiting"], r["running"], r["delayed"], r["dead"],
                      "yes" if r["paused"] else "no", r["workers"]) for r in rows]))
    return 0


def _known(broker: Broker, queue: str) -> str:
    if queue not in known_queues(broker) and queue not in broker.paused_queues():
        raise InvalidParams(f"no queue named {queue!r} (known: {', '.join(known_queues(broker))})")
    return queue


def _act(args, settings, act):
    """Run ``act(broker, queue)`` on a known queue; returns its answer."""
    broker = Broker(settings)
    try:
        return act(broker, _known(broker, args.queue))
    finally:
        broker.close()


def run_pause(args, settings) -> int:
    changed = _act(args, settings, Broker.pause)
    print(f"queue {args.queue} paused" if changed else f"queue {args.queue} was already paused")
    return 0


def run_resume(args, settings) -> int:
    changed = _act(args, settings, Broker.resume)
    print(f"queue {args.queue} resumed" if changed else f"queue {args.queue} was not paused")
    return 0


def run_purge(args, settings) -> int:
    counts = _act(args, settings, Broker.purge)
    print(f"queue {args.queue} purged: {counts['waiting']} waiting and {counts['delayed']} delayed "
          "messages deleted")
    return 0
