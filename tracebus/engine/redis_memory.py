"""How full the Redis is: ``used_memory`` against ``maxmemory``, from INFO memory.

With ``maxmemory-policy noeviction`` (the only policy tracebus accepts for its data) a
Redis past ``maxmemory`` refuses every write that may grow it: submits, unit results,
progress events. ``/readyz`` reports it as a reason and ``/metrics`` as gauges, so a full
Redis is told apart from an unreachable one before a client meets ``REDIS_FULL``.

On a Redis Cluster every master has its own memory and ``maxmemory``, and a write fails
as soon as the master owning its slot is full: :func:`memory_state` reads INFO from every
master (:func:`master_infos`) and reports the total used, with the ratio and fullness of
the fullest master.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from tracebus.engine.cluster_client import is_cluster
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
    node: str = ""
    #: On a cluster: each master's own state (the fields above are then the totals, and
    #: ``ratio``, ``full`` and ``describe`` follow the fullest master).
    nodes: tuple["MemoryState", ...] = ()

    @property
    def fullest(self) -> "MemoryState":
        return max(self.nodes, key=lambda n: n.ratio) if self.nodes else self

    @property
    def ratio(self) -> float:
        """used / max (0.0 without a limit); on a cluster, that of the fullest master."""
        if self.nodes:
            return self.fullest.ratio
        return self.used_bytes / self.max_bytes if self.max_bytes else 0.0

    @property
    def full(self) -> bool:
        """True when writes are (about to be) refused: a limit, no eviction, ratio past FULL_RATIO
        (on a cluster: on some master, whose slots then refuse writes)."""
        if self.nodes:
            return any(n.full for n in self.nodes)
        return bool(self.max_bytes) and self.policy == "noeviction" and self.ratio >= FULL_RATIO

    def describe(self) -> str:
        if self.nodes:
            worst = self.fullest
            return f"master {worst.node} (fullest of {len(self.nodes)}): {worst.describe()}"
        if not self.max_bytes:
            return f"used_memory {self.used_bytes} bytes, no maxmemory"
        return (f"used_memory {self.used_bytes} of maxmemory {self.max_bytes} bytes "
                f"({self.ratio:.0%}, {self.policy})")


def master_infos(client, section: str | None = None) -> list[tuple[str, dict]]:
    """``(node, INFO [section])`` of the one server, or of every master of a cluster (node is
    ``host:port``; "" for one server). A cluster client alone would ask one node only."""
    if not is_cluster(client):
        return [("", client.info(section) if section else client.info())]
    out = []
    for node in client.get_primaries():
        conn = node.redis_connection or client.get_redis_connection(node)
        out.append((f"{node.host}:{node.port}", conn.info(section) if section else conn.info()))
    return out


def _state(node: str, info: dict) -> MemoryState:
    return MemoryState(int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)),
                       str(info.get("maxmemory_policy", "")), node)


def memory_state(client: redis.Redis) -> MemoryState:
    """Read INFO memory (of every master on a cluster).

    Raises:
        BrokerError: Redis cannot be read (BrokerConnectionError when unreachable).
    """
    with redis_errors():
        infos = master_infos(client, "memory")
    if len(infos) == 1 and not infos[0][0]:
        return _state(*infos[0])
    nodes = tuple(_state(node, info) for node, info in infos)
    limited = all(n.max_bytes for n in nodes)
    return MemoryState(sum(n.used_bytes for n in nodes), sum(n.max_bytes for n in nodes) if limited else 0,
                       max(nodes, key=lambda n: n.ratio).policy, nodes=nodes)
