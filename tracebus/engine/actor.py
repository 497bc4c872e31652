"""Dramatiq-style actors: a decorated function with a name, a queue and options.

``@actor`` registers the function in a process-wide registry (so a worker that imports
the module can run its messages) and gives it ``send``, ``send_with_options`` and
``send_many``. An actor only builds and sends messages; running them is the worker's job.
The broker used for sending is the one set with :func:`set_broker`, or one built from
the environment on first use (``REDIS_URL``, else the project's ``var/redis.url``).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from tracebus.engine.errors import ActorNotFound
from tracebus.errors import ConfigError
from tracebus.engine import message as message_module
from tracebus.engine.message import Message

#: Actor options a message may override, with their defaults. Times are milliseconds.
DEFAULT_OPTIONS: dict[str, Any] = {
    "max_retries": 3,            # retries after an exception (not counting crashes)
    "min_backoff_ms": 1_000,     # first retry delay; doubles per retry, with jitter
    "max_backoff_ms": 300_000,   # retry delay cap
    "time_limit_ms": 1_800_000,  # soft limit (TimeLimitExceeded); hard kill at 1.1x + 5 s (the grace setting)
    "max_deliveries": None,      # deliveries before dead-lettering; None: settings.max_deliveries
    "store_results": False,      # keep the return value (or the final failure) for get_result
    "result_ttl_ms": None,       # how long a stored result lives; None: settings.result_ttl_s
}

_registry: dict[str, "Actor"] = {}
_broker = None


def set_broker(broker) -> None:
    """Make ``broker`` the one that actors send through in this process."""
    global _broker
    _broker = broker


def get_broker():
    """The current broker; created from the environment on first use: ``REDIS_URL``, else the
    project's ``var/redis.url`` (:mod:`tracebus.engine.project`).

    Raises:
        ConfigError: no ``REDIS_URL``, in a project whose ``tracebus up`` is not running.
    """
    global _broker
    if _broker is None:
        from tracebus.engine.broker import Broker
        from tracebus.engine.project import project_redis_url
        from tracebus.engine.settings import Settings
        found = None if os.environ.get("REDIS_URL") else project_redis_url()
        _broker = Broker(Settings.from_env(redis_url=found[0]) if found else Settings.from_env())
    return _broker


message_module.broker_of_process = get_broker


def get_actor(name: str) -> "Actor":
    """The registered actor called ``name``.

    Raises:
        ActorNotFound: no module imported in this process declared it.
    """
    try:
        return _registry[name]
    except KeyError:
        raise ActorNotFound(f"no actor named {name!r} is registered in this process") from None


def registered_actors() -> dict[str, "Actor"]:
    return dict(_registry)


def _to_ms(delay) -> int | None:
    if delay is None:
        return None
    if isinstance(delay, datetime.timedelta):
        return int(delay.total_seconds() * 1000)
    return int(delay)


@dataclass
class Actor:
    """A function that can be sent as a message.

    Attributes:
        fn: the function to run.
        actor_name(str): the registered name (defaults to the function's name).
        queue_name(str | Callable): the queue its messages go to, or a function of the
            process's settings that names it (an application whose queue is configurable
            keeps one source of truth for the name: its settings).
        options(dict): defaults for every message (see :data:`DEFAULT_OPTIONS`).
    """

    fn: Callable
    actor_name: str
    queue_name: str | Callable[[Any], str] = "default"
    options: dict = field(default_factory=dict)
    schedule: str | None = None

    def queue_for(self, settings) -> str:
        """The actor's queue under ``settings`` (the process's settings object)."""
        return self.queue_name(settings) if callable(self.queue_name) else self.queue_name

    def __call__(self, *args, **kwargs):
        """Run the function synchronously, in this process."""
        return self.fn(*args, **kwargs)

    def option(self, message: Message, name: str):
        """An option's effective value for ``message``: message, then actor, then default."""
        if name in message.options:
            return message.options[name]
        return self.options.get(name, DEFAULT_OPTIONS.get(name))

    def message(self, args: Sequence = (), kwargs: dict | None = None, **options) -> Message:
        """Build (without sending) a message for this actor."""
        if self.options.get("max_deliveries") and "max_deliveries" not in options:
            # The delivery limit is enforced in Lua from the stream entry (field `x`), where
            # the actor is unknown: the actor's limit has to travel with each message.
            options["max_deliveries"] = self.options["max_deliveries"]
        queue = self.queue_name if isinstance(self.queue_name, str) else self.queue_for(get_broker().settings)
        return Message(queue, self.actor_name, tuple(args), kwargs or {}, options)

    def send(self, *args, **kwargs) -> Message:
        """Enqueue a message with these arguments. Returns it (``message_id`` identifies it)."""
        return get_broker().enqueue(self.message(args, kwargs))

    def send_with_options(self, *, args: Sequence = (), kwargs: dict | None = None,
                          delay: int | datetime.timedelta | None = None, **options) -> Message:
        """Enqueue with per-message options; ``delay`` is milliseconds or a timedelta."""
        unknown = set(options) - set(DEFAULT_OPTIONS)
        if unknown:
            raise ConfigError(f"unknown message options: {', '.join(sorted(unknown))}")
        message = self.message(args, kwargs, **options)
        return get_broker().enqueue(message, delay_ms=_to_ms(delay))

    def send_many(self, calls: Iterable[Sequence | tuple[Sequence, dict]]) -> list[Message]:
        """Enqueue many messages in one round trip.

        Args:
            calls: each item is an args sequence, or an ``(args, kwargs)`` pair.
        """
        messages = []
        for call in calls:
            if len(call) == 2 and isinstance(call[1], dict) and isinstance(call[0], (list, tuple)):
                messages.append(self.message(call[0], call[1]))
            else:
                messages.append(self.message(call))
        get_broker().enqueue_many(messages)
        return messages


def actor(fn: Callable | None = None, *, actor_name: str | None = None,
          queue: str | Callable[[Any], str] = "default", schedule: str | None = None,
          **options) -> Actor | Callable[[Callable], Actor]:
    """Declare an actor, bare (``@actor``) or with options (``@actor(queue="q", max_retries=0)``).

    Args:
        actor_name: registered name (default: the function's ``__name__``).
        queue: the queue its messages are sent to, or a function of the settings naming it.
        schedule: a cron expression (``"*/5 * * * *"``, UTC): every supervisor that imports
            the actor sends it, without arguments, once per tick between them all
            (:mod:`tracebus.engine.scheduler`).
        **options: any of :data:`DEFAULT_OPTIONS`.

    Raises:
        ConfigError: an unknown option, a bad schedule, or a name already taken by another
            function.
    """
    unknown = set(options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown actor options: {', '.join(sorted(unknown))}")
    if schedule is not None:
        from tracebus.engine.scheduler import check_expression

        check_expression(schedule, "schedule of an actor")

    def decorate(f: Callable) -> Actor:
        name = actor_name or f.__name__
        existing = _registry.get(name)
        if existing is not None and existing.fn.__qualname__ != f.__qualname__:
            raise ConfigError(f"actor name {name!r} is already used by {existing.fn.__module__}."
                              f"{existing.fn.__qualname__}")
        _registry[name] = a = Actor(f, name, queue, dict(options), schedule)
        return a

    return decorate(fn) if fn is not None else decorate
