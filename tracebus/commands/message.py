"""``tracebus message ID [--queue Q] [--json]``: a message's state, deliveries and result.

States: queued, running (with the worker's consumer), delayed (a retry or a delay, with
when it is due), dead (with the reason), done / failed (its stored result or error, for
actors with ``store_results``). The queues are scanned: an operator's question, not a
hot path. Exit code 1 when the message is nowhere (finished without a stored result, or
its records expired), 2 for an id that is not one.
"""

from __future__ import annotations

import re

from tracebus.engine.broker import Broker
from tracebus.engine.lookup import locate
from tracebus.errors import InvalidParams
from tracebus.commands._common import fmt_time, known_queues, print_json

_ID = re.compile(r"[0-9a-f]{32}")


def add_parser(sub) -> None:
    p = sub.add_parser("message", help="show a message's state, deliveries and result",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.add_argument("message_id", metavar="ID", help="the message id (32 hex digits, as 'tracebus send' prints)")
    p.add_argument("--queue", "-Q", help="look only in this queue (default: every queue)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    if not _ID.fullmatch(args.message_id):
        raise InvalidParams(f"not a message id (32 hex digits): {args.message_id!r}")
    broker = Broker(settings)
    try:
        found = locate(broker, args.message_id, [args.queue] if args.queue else known_queues(broker))
    finally:
        broker.close()
    if args.json:
        print_json(found)
        return 0
    print(render(found))
    return 0


def render(found: dict) -> str:
    lines = [f"message   {found['message_id']}", f"state     {found['state']}"]
    if "actor" in found:
        call = ", ".join([*map(repr, found["args"]), *(f"{k}={v!r}" for k, v in found["kwargs"].items())])
        lines += [f"actor     {found['actor']}({call})", f"queue     {found['queue']}",
                  f"enqueued  {fmt_time(found['enqueued_ms'] / 1000)}", f"retries   {found['retries']}"]
    if found.get("deliveries") is not None:
        lines.append(f"deliveries {found['deliveries']}")
    if "consumer" in found:
        lines.append(f"worker    {found['consumer']}")
    if "due_ms" in found:
        lines.append(f"due       {fmt_time(found['due_ms'] / 1000)}")
    if found.get("reason"):
        lines.append(f"reason    {found['reason'].splitlines()[0]}")
    if "result" in found:
        lines.append(f"result    {found['result']!r}")
    if "error" in found:
        lines.append(f"error     {found['error']['type']}: {found['error']['message']}")
    return "\n".join(lines)
