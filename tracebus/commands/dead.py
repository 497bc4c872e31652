"""``tracebus dead [list|requeue|purge]``: the dead-letter streams of the queues (``list`` the default).

A message is dead-lettered when its retries are exhausted, when it was delivered too
many times (its worker kept dying), or when it cannot be decoded or run. ``requeue``
sends it back to its queue with a fresh set of retries; ``purge`` deletes records.
IDs are dead-record ids as ``dead list`` shows them; without ``--queue`` each id is
looked for in every queue. The operations are the API's (:mod:`tracebus.engine.dead_letters`).
"""

from __future__ import annotations

import sys

from tracebus.engine import dead_letters
from tracebus.engine.broker import Broker
from tracebus.errors import TracebusError
from tracebus.commands._common import fmt_time, int_at_least, known_queues, print_json, table


def add_parser(sub) -> None:
    p = sub.add_parser("dead", help="list, requeue or purge dead-lettered messages",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    # no ACTION: list (as `queues`), with list's defaults
    p.set_defaults(func=run_list, queue=None, limit=50, json=False)
    dead = p.add_subparsers(dest="action", metavar="ACTION")

    ls = dead.add_parser("list", help="list dead-lettered messages, newest first (the default)",
                         description="List dead-lettered messages, newest first.")
    ls.add_argument("--queue", "-Q", help="only this queue (default: every queue)")
    ls.add_argument("--limit", type=int_at_least(1), default=50,
                    help="at most this many per queue (default 50)")
    ls.add_argument("--json", action="store_true", help="print JSON (with the full reason)")
    ls.set_defaults(func=run_list)

    rq = dead.add_parser("requeue", help="send dead-lettered messages back to their queue",
                         description="Send messages back to their queue with a fresh set of retries; "
                                     "their dead records are deleted. Each is requeued at most once.")
    _targets(rq)
    rq.set_defaults(func=run_requeue)

    purge = dead.add_parser("purge", help="delete dead-letter records",
                            description="Delete dead-letter records for good.")
    _targets(purge)
    purge.set_defaults(func=run_purge)


def _targets(p) -> None:
    p.add_argument("ids", nargs="*", metavar="ID", help="dead-record ids (from 'tracebus dead list')")
    p.add_argument("--all", action="store_true", help="every record (of --queue, or of every queue)")
    p.add_argument("--queue", "-Q", help="the queue the ids belong to (default: look in every queue)")


def _queues(broker: Broker, args) -> list[str]:
    return [args.queue] if args.queue else known_queues(broker)


def _check_targets(args) -> bool:
    if bool(args.ids) == bool(args.all):
        print(f"tracebus dead {args.action}: give record IDs or --all (not both)", file=sys.stderr)
        return False
    return True


def run_list(args, settings) -> int:
    import tracebus.trace.tasks  # noqa: F401  (so trace units are described with their job and unit)

    broker = Broker(settings)
    records = []
    for queue in _queues(broker, args):
        records += [dead_letters.record(queue, entry) for entry in broker.dead_entries(queue, count=args.limit)]
    broker.close()
    if args.json:
        print_json(records)
        return 0
    if not records:
        print("no dead-lettered messages")
        return 0
    print(table(("id", "queue", "dead since", "actor", "args", "deliveries", "reason"),
                [(r["id"], r["queue"], fmt_time(r["time"]), r["actor"] or "-",
                  _short(repr(tuple(r["args"])) if r["args"] is not None else "-", 40), r["deliveries"],
                  _short(r["reason"].splitlines()[0] if r["reason"] else "", 60)) for r in records]))
    return 0


def run_requeue(args, settings) -> int:
    if not _check_targets(args):
        return 2
    broker = Broker(settings)
    done, reasons = {}, {}
    for queue in _queues(broker, args):
        todo = None if args.all else [i for i in args.ids if i not in done]
        for result in dead_letters.requeue(broker, queue, todo):
            if "requeued_as" in result:
                done[result["id"]] = (queue, result["requeued_as"])
            elif result["skipped"] != "missing":
                reasons[result["id"]] = result["skipped"]
    broker.close()
    for dead_id, (queue, new_id) in done.items():
        print(f"{dead_id}: requeued on {queue} as {new_id}")
    failed = {i: reasons.get(i, "no such dead record") for i in (args.ids or reasons) if i not in done}
    for dead_id, why in failed.items():
        print(f"tracebus: {dead_id}: not requeued: {why}", file=sys.stderr)
    if args.all and not done and not failed:
        print("no dead-lettered messages")
    return 1 if failed else 0


def run_purge(args, settings) -> int:
    if not _check_targets(args):
        return 2
    broker = Broker(settings)
    deleted, found = 0, set()
    for queue in _queues(broker, args):
        count, missing = dead_letters.purge(broker, queue, None if args.all else args.ids)
        deleted += count
        found.update(set(args.ids) - set(missing))
    broker.close()
    print(f"{deleted} dead-letter record(s) deleted")
    missing = [i for i in args.ids if i not in found]
    if missing:
        raise TracebusError(f"no such dead record: {', '.join(missing)}")
    return 0


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
