"""Time limits: a soft limit raised inside the actor, a hard one enforced by the supervisor.

The soft limit uses ``setitimer(ITIMER_REAL)``: the worker runs one message at a time on
its main thread, so SIGALRM raises :class:`TimeLimitExceeded` right in the actor's code.
A C call that never returns to Python (a stuck query) cannot be interrupted that way,
so the worker also publishes a hard deadline in its heartbeat slot and the supervisor
kills the process past it.
"""

from __future__ import annotations

import signal
import time

from tracebus.engine.errors import TimeLimitExceeded
from tracebus.engine.middleware import Middleware

#: Hard deadline = soft limit * HARD_FACTOR + ``TRACEBUS_HARD_TIME_LIMIT_GRACE_SECONDS`` (5 s).
HARD_FACTOR = 1.1


def _on_alarm(signum, frame):
    raise TimeLimitExceeded("time limit exceeded")


class TimeLimit(Middleware):
    """Arms the soft timer before each message and publishes the hard deadline."""

    def after_worker_boot(self, worker) -> None:
        signal.signal(signal.SIGALRM, _on_alarm)

    def before_process(self, worker, actor, message) -> None:
        limit_ms = actor.option(message, "time_limit_ms")
        if limit_ms:
            signal.setitimer(signal.ITIMER_REAL, limit_ms / 1000)
            grace_s = worker.broker.settings.hard_time_limit_grace_s
            worker.slot.set_deadline(time.monotonic() + limit_ms / 1000 * HARD_FACTOR + grace_s)

    def after_process(self, worker, actor, message, error) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        worker.slot.set_deadline(0.0)
