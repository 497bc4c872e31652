"""How full the Redis is: ``used_memory`` against ``maxmemory``, from INFO memory.

With ``maxmemory-policy noeviction`` (the only policy tracebus accepts for its data) a
Redis past ``maxmemory`` refuses every write that may grow it: submits, unit results,
progress events. ``/readyz`` reports it as a reason and ``/metrics`` as gauges, so a full
Redis is told apart from an unreachable one before a client meets ``REDIS_FULL``.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from tracebus.engine.redis_errors import redis_errors

#: Used over maxmemory at or above which Redis is reported full: a refused write leaves
#: memory just under the limit, and the next bigger one is refused too.
FULL_RATIO = 0.98


@dataclass(frozen=True, slots=True)
class MemoryState:
    """One reading of INFO memory.

    Attributes:
        used_bytes(int): ``used_memory``.
        max_bytes(int): ``maxmemory`` (0: no limit).
        policy(str): ``maxmemory_policy``.
    """

    used_bytes: int
    max_bytes: int
    policy: str

    @property
    def ratio(self) -> float:
        """used / max (0.0 without a limit)."""
        return self.used_bytes / self.max_bytes if self.max_bytes else 0.0

    @property
    def full(self) -> bool:
        """True when writes are (about to be) refused: a limit, no eviction, ratio past FULL_RATIO."""
        return bool(self.max_bytes) and self.policy == "noeviction" and self.ratio >= FULL_RATIO

    def describe(self) -> str:
        if not self.max_bytes:
            return f"used_memory {self.used_bytes} bytes, no maxmemory"
        return (f"used_memory {self.used_bytes} of maxmemory {self.max_bytes} bytes "
                f"({self.ratio:.0%}, {self.policy})")


def memory_state(client: redis.Redis) -> MemoryState:
    """Read INFO memory.

    Raises:
        BrokerError: Redis cannot be read (BrokerConnectionError when unreachable).
    """
    with redis_errors():
        info = client.info("memory")
    return MemoryState(int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)),
                       str(info.get("maxmemory_policy", "")))
