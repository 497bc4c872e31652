"""One process's view of whether Redis is there: backoff, and one log line per state change.

A loop that talks to Redis (the worker's, the supervisor's, the API's readiness) reports each
failure and each success to its :class:`Outage`. The first failure logs ``Redis unreachable:
...`` once; later ones only lengthen the wait (exponential with jitter, capped); the first
success after that logs ``Redis back after N s`` once. During a failover the errors change
(refused, READONLY, LOADING, no master): they are all one state, "Redis is moving".
"""

from __future__ import annotations

import logging
import random
import time

#: First and longest wait between attempts while Redis is away.
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 1.0


class Outage:
    """Failures and recoveries of Redis seen by one loop.

    Args:
        who(str): names the loop in the log lines (``"worker c1"``, ``"supervisor"``).
        logger: where the two lines go.
    """

    def __init__(self, who: str, logger: logging.Logger, first_s: float = FIRST_DELAY_S,
                 cap_s: float = MAX_DELAY_S):
        self.who = who
        self.log = logger
        self.first_s = first_s
        self.cap_s = cap_s
        self.down_since: float | None = None
        self.delay_s = 0.0
        self.retry_at = 0.0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: Exception) -> float:
        """Note a failure; returns how long to wait before the next attempt."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            self.delay_s = self.first_s
            self.log.warning("%s: %s", self.who, _reason(error))
        else:
            self.delay_s = min(self.delay_s * 2, self.cap_s)
        wait = self.delay_s * random.uniform(0.8, 1.2)
        self.retry_at = now + wait
        return wait

    def due(self) -> bool:
        """True when an attempt may be made now (always, while Redis is up)."""
        return self.down_since is None or time.monotonic() >= self.retry_at

    def recovered(self) -> float | None:
        """Note a success; returns the outage's length in seconds when one just ended."""
        if self.down_since is None:
            return None
        lasted = time.monotonic() - self.down_since
        self.down_since = None
        self.log.warning("%s: Redis back after %.1f s", self.who, lasted)
        return lasted


def _reason(error: Exception) -> str:
    text = str(error)
    return text if text.startswith("Redis") else f"Redis unreachable: {text}"
