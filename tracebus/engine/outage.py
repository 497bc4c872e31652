"""One process's view of whether Redis is there: backoff, and one log line per state change.

A loop that talks to Redis (the worker's, the supervisor's, the API's readiness) reports each
failure and each success to its :class:`Outage`. The first failure logs ``Redis unreachable:
...`` once; later ones only lengthen the wait (exponential with jitter, capped); the first
success after that logs ``Redis back after N s`` once. During a failover the errors change
(refused, READONLY, LOADING, no master): they are all one state, "Redis is moving".

Right after Redis returns, the other connections of a pool meet the restart one by one
("Connection closed by server"): a failure within :data:`RELAPSE_S` of the "back" line is a
relapse of the same outage, logged at debug with the "back" that ends it, unless it lasts
longer than that (then it is said, as a new outage). So a restart reads as two lines, not
"back", "unreachable", "back".
"""

from __future__ import annotations

import logging
import random
import time

#: First and longest wait between attempts while Redis is away.
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 1.0
#: A failure this soon after "Redis back" is the same outage's tail (stale pooled connections).
RELAPSE_S = 5.0


class Outage:
    """Failures and recoveries of Redis seen by one loop.

    Args:
        who(str): names the loop in the log lines (``"worker c1"``, ``"supervisor"``).
        logger: where the two lines go.
        relapse_s(float): a failure this soon after a recovery is its tail (:data:`RELAPSE_S`).
        clock: the monotonic clock (a test's own).
    """

    def __init__(self, who: str, logger: logging.Logger, first_s: float = FIRST_DELAY_S,
                 cap_s: float = MAX_DELAY_S, relapse_s: float = RELAPSE_S, clock=time.monotonic):
        self.who = who
        self.log = logger
        self.first_s = first_s
        self.cap_s = cap_s
        self.relapse_s = relapse_s
        self.clock = clock
        self.down_since: float | None = None
        self.delay_s = 0.0
        self.retry_at = 0.0
        self.back_at = float("-inf")
        self.quiet: str | None = None  # the reason of a relapse not said yet

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: Exception) -> float:
        """Note a failure; returns how long to wait before the next attempt."""
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            self.delay_s = self.first_s
            if now - self.back_at < self.relapse_s:
                self.quiet = _reason(error)
                self.log.debug("%s: %s (right after it came back)", self.who, self.quiet)
            else:
                self.log.warning("%s: %s", self.who, _reason(error))
        else:
            self.delay_s = min(self.delay_s * 2, self.cap_s)
            if self.quiet is not None and now - self.down_since >= self.relapse_s:
                self.log.warning("%s: %s", self.who, self.quiet)  # no tail: a new outage
                self.quiet = None
        wait = self.delay_s * random.uniform(0.8, 1.2)
        self.retry_at = now + wait
        return wait

    def due(self) -> bool:
        """True when an attempt may be made now (always, while Redis is up)."""
        return self.down_since is None or self.clock() >= self.retry_at

    def recovered(self) -> float | None:
        """Note a success; returns the outage's length in seconds when one just ended."""
        if self.down_since is None:
            return None
        now = self.clock()
        lasted = now - self.down_since
        self.down_since = None
        level = logging.DEBUG if self.quiet is not None else logging.WARNING
        self.quiet = None
        self.back_at = now
        self.log.log(level, "%s: Redis back after %.1f s", self.who, lasted)
        return lasted


def _reason(error: Exception) -> str:
    text = str(error)
    return text if text.startswith("Redis") else f"Redis unreachable: {text}"
