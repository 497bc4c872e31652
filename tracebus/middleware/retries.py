"""Retry decisions: exponential backoff with full jitter, bounded by the actor's options.

Pure functions: the worker asks :func:`decide` what to do with a failed message and
carries out the answer (schedule a delayed copy, or dead-letter it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import Retry


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
    if retries >= max_retries:
        return Decision(False, reason=f"gave up after {retries} retries: {type(error).__name__}: {error}")
    if isinstance(error, Retry) and error.delay_ms is not None:
        return Decision(True, int(error.delay_ms))
    return Decision(True, backoff_ms(retries, min_ms, max_ms))
