"""The registry of live workers in Redis, so they can be listed (``tracebus status``).

Each worker writes a hash ``P:worker:<consumer>`` (host, pid, queues, current message,
messages done, RSS) with a TTL and is indexed in the zset ``P:workers`` by last-seen
time. The child refreshes its hash about once a second from its loop; the supervisor
refreshes the TTL of its live children each tick (a child inside a long message does
not loop) and deletes the entries of children it reaps.
"""

from __future__ import annotations

import os
import socket

from tracebus.engine.redis_errors import translate_errors
from tracebus.engine.message import now_ms

#: A worker entry lives this long past its last refresh.
TTL_S = 30


class WorkerRegistry:
    def __init__(self, broker):
        self.client = broker.client
        self.keys = broker.keys

    @translate_errors
    def publish(self, worker) -> None:
        """Write ``worker``'s current state."""
        from tracebus.engine.memory import current_rss_bytes

        current = worker.current
        key = self.keys.worker(worker.consumer)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, mapping={
            "consumer": worker.consumer, "host": socket.gethostname(), "pid": os.getpid(),
            "queues": ",".join(worker.queues), "done": worker.done, "rss_bytes": current_rss_bytes(),
            "current": f"{current.actor_name}:{current.message_id}" if current else "",
            "started_ms": worker.started_ms, "seen_ms": now_ms(),
        })
        pipe.expire(key, TTL_S)
        pipe.zadd(self.keys.workers(), {worker.consumer: now_ms()})
        pipe.execute()

    @translate_errors
    def touch(self, consumers) -> None:
        """Extend the TTL of live workers' entries (called by the supervisor)."""
        if not consumers:
            return
        pipe = self.client.pipeline(transaction=False)
        ms = now_ms()
        for consumer in consumers:
            pipe.expire(self.keys.worker(consumer), TTL_S)
            pipe.zadd(self.keys.workers(), {consumer: ms})
        pipe.execute()

    @translate_errors
    def remove(self, consumer: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.keys.worker(consumer))
        pipe.zrem(self.keys.workers(), consumer)
        pipe.execute()

    @translate_errors
    def list(self) -> list[dict]:
        """Live workers (entries whose hash has not expired), oldest first."""
        cutoff = now_ms() - TTL_S * 1000
        self.client.zremrangebyscore(self.keys.workers(), "-inf", cutoff)
        consumers = [c.decode() for c in self.client.zrange(self.keys.workers(), 0, -1)]
        pipe = self.client.pipeline(transaction=False)
        for consumer in consumers:
            pipe.hgetall(self.keys.worker(consumer))
        out = []
        for raw in pipe.execute():
            if raw:
                out.append({k.decode(): v.decode() for k, v in raw.items()})
        return out

