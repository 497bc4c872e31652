"""Retries: failed messages run again later, with exponential backoff and full jitter.

:class:`Retries` is the middleware; :func:`decide` and :func:`backoff_ms` are the pure
decision it makes, bounded by the actor's options (``max_retries``, ``min_backoff_ms``,
``max_backoff_ms``). An error whose ``retryable`` attribute is False (a permanent source
error, say) is never retried. A message it gives up on is offered to the rest of the stack,
then dead-lettered by the worker.
"""

from __future__ import annotations

import functools
import logging
import random
from dataclasses import dataclass

from tracebus.engine.errors import Retry
from tracebus.engine.middleware import Middleware

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a failed message: retry after ``delay_ms``, or give up (``reason``)."""

    retry: bool
    delay_ms: int = 0
    reason: str = ""


def backoff_ms(retries: int, min_ms: int, max_ms: int, rng: random.Random | None = None) -> int:
    """Delay before retry number ``retries + 1``: min * 2**retries, capped, with jitter.

    The jitter keeps a burst of failures (a database blip) from retrying in lockstep;
    the delay is drawn uniformly from [half, full] of the exponential value.
    """
    rng = rng or random
    ceiling = min(max_ms, min_ms * (2 ** min(retries, 32)))
    return int(rng.uniform(ceiling / 2, ceiling))


def decide(retries: int, max_retries: int, min_ms: int, max_ms: int, error: BaseException) -> Decision:
    """Retry or give up after ``error``.

    Args:
        retries: retries already made for this message.
        max_retries: the actor's limit.
        error: what the actor raised; a :class:`Retry` may carry its own delay.
    """
    if not getattr(error, "retryable", True):
        return Decision(False, reason=f"not retryable: {type(error).__name__}: {error}")
    if retries >= max_retries:
        return Decision(False, reason=f"gave up after {retries} retries: {type(error).__name__}: {error}")
    if isinstance(error, Retry) and error.delay_ms is not None:
        return Decision(True, int(error.delay_ms))
    return Decision(True, backoff_ms(retries, min_ms, max_ms))


def retries_made(message) -> int:
    """How many times ``message`` has been retried already."""
    return message.options.get("retries", 0)


class Retries(Middleware):
    """Schedules a delayed copy of a failed message (one atomic ZADD + XACK), or gives up."""

    def handle_failure(self, worker, actor, delivery, error) -> bool:
        message = delivery.message
        tried = retries_made(message)
        option = functools.partial(actor.option, message)
        decision = decide(tried, option("max_retries"), option("min_backoff_ms"), option("max_backoff_ms"), error)
        if not decision.retry:
            worker.failure_reason = worker.failure_reason or decision.reason
            return False
        log.warning("message %s (%s) failed: %r; retry %d in %d ms", message.message_id,
                    message.actor_name, error, tried + 1, decision.delay_ms)
        worker.broker.retry_later(delivery, message.copy(options={"retries": tried + 1}), decision.delay_ms)
        return True
