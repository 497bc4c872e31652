"""``tracebus send ACTOR [ARG ...]``: enqueue one message, arguments as JSON.

ACTOR is ``module:name`` (the module is imported, so the actor's queue and options are
its own) or a bare actor name sent to ``--queue`` (default ``default``) for a worker that
imports it. Each ARG is one JSON value (``42``, ``'"text"'``, ``'[1, 2]'``); ``--kwargs``
takes a JSON object. Prints the message id; with ``--wait`` it waits for the message to
run and prints its result as JSON (the message stores its result for this). A bare name
goes only to a queue that exists (a worker or a ``module:name`` send declared it): another
is a typo, refused before anything is written. When no live worker reads the message's
queue, stderr says so (the message waits there). Exit code 1 when the message failed or no
result came within ``--timeout``; 2 for bad input (an unknown queue too).
"""

from __future__ import annotations

import importlib
import json
import sys

from tracebus.engine.actor import Actor, get_actor, set_broker
from tracebus.engine.broker import Broker
from tracebus.engine.errors import ActorNotFound
from tracebus.errors import ConfigError, InvalidParams
from tracebus.commands._common import int_at_least, known_queues, print_json
from tracebus.engine.registry import WorkerRegistry


def add_parser(sub) -> None:
    p = sub.add_parser("send", help="enqueue a message for an actor (JSON arguments)",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.add_argument("actor", metavar="ACTOR", help="module:name, or a bare actor name with --queue")
    p.add_argument("args", nargs="*", metavar="ARG", help="positional arguments, one JSON value each")
    p.add_argument("--kwargs", default="{}", metavar="JSON", help="keyword arguments as a JSON object")
    p.add_argument("--queue", "-Q", default=None, help="queue of a bare actor name (default: default)")
    p.add_argument("--delay", type=int_at_least(0), default=0, metavar="MS", help="send after MS milliseconds")
    p.add_argument("--wait", action="store_true", help="wait for the result and print it as JSON")
    p.add_argument("--timeout", type=int_at_least(1), default=60_000, metavar="MS",
                   help="longest wait with --wait (default 60000)")
    p.set_defaults(func=run)


def parse_args(values: list[str], kwargs: str) -> tuple[list, dict]:
    """Decode the JSON arguments.

    Raises:
        InvalidParams: one is not JSON (the message says which), or --kwargs is not an object.
    """
    args = []
    for i, text in enumerate(values, 1):
        try:
            args.append(json.loads(text))
        except ValueError as e:
            raise InvalidParams(f"argument {i} is not JSON ({e}): {text!r}; quote a string as '\"{text}\"'") \
                from None
    try:
        keywords = json.loads(kwargs)
    except ValueError as e:
        raise InvalidParams(f"--kwargs is not JSON: {e}") from None
    if not isinstance(keywords, dict):
        raise InvalidParams("--kwargs must be a JSON object")
    return args, keywords


def resolve(name: str, queue: str | None) -> Actor:
    """The actor named by ``module:name``, or a stand-in for a bare name on ``queue``."""
    module, sep, actor_name = name.partition(":")
    if not sep:
        if not name.isidentifier():
            raise InvalidParams(f"ACTOR must be module:name or an actor name, got {name!r}")
        return Actor(fn=None, actor_name=name, queue_name=queue or "default")
    sys.path.insert(0, ".")
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"cannot import {module!r}: {e}") from None
    if queue:
        raise InvalidParams(f"{name} sends to the queue its actor declares; drop --queue")
    try:
        return get_actor(actor_name)
    except ActorNotFound:
        raise InvalidParams(f"module {module} declares no actor named {actor_name!r}") from None


def run(args, settings) -> int:
    positional, keywords = parse_args(args.args, args.kwargs)
    actor = resolve(args.actor, args.queue)
    broker = Broker(settings)
    set_broker(broker)
    try:
        if actor.fn is None:
            _check_queue(broker, actor.queue_name)
        _say_if_unread(broker, actor.queue_name)
        options = {"store_results": True} if args.wait else {}
        message = actor.message(positional, keywords, **options)
        broker.enqueue(message, delay_ms=args.delay or None)
        if not args.wait:
            print(message.message_id)
            return 0
        print(f"sent {message.message_id} to queue {message.queue_name}; waiting for its result",
              file=sys.stderr)
        print_json(message.get_result(block=True, timeout=args.timeout + args.delay, broker=broker))
        return 0
    finally:
        broker.close()


def _check_queue(broker: Broker, queue: str) -> None:
    """A bare name's queue must exist: sending would create a stream nobody reads, forever.

    Raises:
        InvalidParams: no worker (nor a module:name send) declared ``queue``.
    """
    known = known_queues(broker)
    if queue not in known:
        raise InvalidParams(f"no queue {queue!r} (queues: {', '.join(known)}); pass --queue, or start "
                            f"a worker on it first")


def _say_if_unread(broker: Broker, queue: str) -> None:
    """One stderr line when no live worker reads ``queue``: the message would wait unnoticed."""
    read = {q for w in WorkerRegistry(broker).list() for q in (w.get("queues") or "").split(",") if q}
    if queue not in read:
        print(f"tracebus: no live worker reads queue {queue} (workers read: {', '.join(sorted(read)) or 'none'});"
              f" the message waits there until one does", file=sys.stderr)
