"""Periodic messages: cron schedules run once per tick across every supervisor.

A schedule comes from an actor (``@tracebus.actor(schedule="*/5 * * * *")``) or from a
schedule file (:func:`read_schedule_file`). Expressions are parsed by croniter (five
fields, a sixth for seconds, or ``@hourly``-style aliases) and evaluated in UTC. Every
supervisor runs a :class:`Scheduler` in its housekeeping; when a tick comes, each one tries
``SET P:sched:<name>:<tick> NX EX ...`` and only the one that wins sends the message, so a
tick runs once however many supervisors (on however many hosts) run the schedule. Only
ticks after a supervisor started are sent (a restart does not replay missed ones; another
supervisor covers the gap). The message carries the tick as option ``scheduled_at``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from tracebus.engine.errors import ActorNotFound
from tracebus.engine.redis_errors import redis_errors
from tracebus.errors import ConfigError

log = logging.getLogger(__name__)

#: Most ticks of one schedule sent in one pass (a supervisor that was stalled does not flood).
MAX_CATCH_UP = 10
_SECONDS_FIELD = set("0123456789*/,-")


def check_expression(expr: str, what: str) -> str:
    """``expr`` when croniter accepts it.

    Raises:
        ConfigError: it does not parse (``what`` says where it came from).
    """
    if not isinstance(expr, str) or not _croniter().is_valid(expr):
        raise ConfigError(f"{what}: {expr!r} is not a cron expression (e.g. '*/5 * * * *')")
    return expr


def next_tick(expr: str, after_s: float) -> float:
    """The first tick of ``expr`` strictly after ``after_s`` (epoch seconds, UTC)."""
    return _croniter()(expr, datetime.fromtimestamp(after_s, timezone.utc)).get_next(float)


def _croniter():
    """croniter, imported on first use: at import it runs ``file -b`` on the interpreter
    (``platform.architecture()``), a child process a supervisor should not have when no
    actor is periodic."""
    from croniter import croniter

    return croniter


@dataclass
class Schedule:
    """One periodic message: ``actor`` called with ``args``/``kwargs`` at every tick of ``expr``.

    Attributes:
        name(str): names the tick locks: the actor's name, or ``file:<line>:<actor>``.
    """

    name: str
    expr: str
    actor: object
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


def read_schedule_file(path: str, find_actor: Callable[[str], object]) -> list[Schedule]:
    """Schedules from a file of lines ``CRON ACTOR [JSON array of args]`` (``#`` lines are comments).

    CRON is five fields, six with seconds, or an alias (``@daily``); ACTOR is a registered
    actor name (``find_actor`` resolves it).

    Raises:
        ConfigError: the file cannot be read, or a line is malformed (the message says which).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"schedule file {path}: {e.strerror}") from None
    out = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"schedule file {path}, line {number}"
        tokens = line.split(None)
        n = 1 if tokens[0].startswith("@") else 5
        if len(tokens) > 6 and n == 5 and set(tokens[5]) <= _SECONDS_FIELD:
            n = 6
        if len(tokens) <= n:
            raise ConfigError(f"{where}: expected CRON ACTOR [JSON args], got {line!r}")
        expr = check_expression(" ".join(tokens[:n]), where)
        rest = line.split(None, n + 1)
        actor_name, args_text = rest[n], (rest[n + 1] if len(rest) > n + 1 else "[]")
        try:
            args = json.loads(args_text)
        except ValueError as e:
            raise ConfigError(f"{where}: the arguments are not JSON: {e}") from None
        if not isinstance(args, list):
            raise ConfigError(f"{where}: the arguments must be a JSON array")
        try:
            actor = find_actor(actor_name)
        except ActorNotFound as e:
            raise ConfigError(f"{where}: {e}") from None
        out.append(Schedule(f"file:{number}:{actor_name}", expr, actor, tuple(args)))
    return out


class Scheduler:
    """Sends the due ticks of ``schedules`` through ``broker`` (see the module docstring).

    Args:
        clock: epoch seconds now (a test may pass another; production uses ``time.time``).
    """

    def __init__(self, broker, schedules: Sequence[Schedule], clock: Callable[[], float] = time.time):
        self.broker, self.schedules, self.clock = broker, list(schedules), clock
        started = clock()
        self.due = {s.name: next_tick(s.expr, started) for s in self.schedules}
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    def run_due(self) -> int:
        """Send the ticks that came since the last call (those this supervisor wins).

        Returns:
            int: messages sent by this supervisor.
        """
        now, sent = self.clock(), 0
        for s in self.schedules:
            tick, n = self.due[s.name], 0
            while tick <= now and n < MAX_CATCH_UP:
                sent += self._claim_and_send(s, tick)
                tick, n = next_tick(s.expr, tick), n + 1
            if tick <= now:  # stalled for more than MAX_CATCH_UP ticks: skip to the present
                log.warning("schedule %s: skipped ticks up to %s", s.name, _iso(now))
                tick = next_tick(s.expr, now)
            self.due[s.name] = tick
        return sent

    def _claim_and_send(self, s: Schedule, tick: float) -> int:
        period_s = next_tick(s.expr, tick) - tick
        lock = self.broker.keys.schedule_tick(s.name, int(tick))
        # The lock outlives the tick by far more than any clock skew between hosts.
        with redis_errors():
            won = self.broker.client.set(lock, self.owner, nx=True, ex=int(max(60, 2 * period_s)))
        if not won:
            log.debug("schedule %s: tick %s already sent by another supervisor", s.name, _iso(tick))
            return 0
        message = s.actor.message(s.args, s.kwargs, scheduled_at=tick)
        self.broker.enqueue(message)
        log.info("schedule %s: tick %s sent as message %s", s.name, _iso(tick), message.message_id)
        return 1


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="seconds")
