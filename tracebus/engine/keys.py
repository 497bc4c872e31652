"""Every Redis key name the queue engine uses, under one configurable prefix.

No other engine module builds a key by hand: they call a method here, so the engine's key
space can be read (and its TTLs audited) in one place; the job layer's keys are in
:mod:`tracebus.jobs.keys`, under the same prefix. Lua scripts receive the keys
through ``KEYS[]``; they never build names themselves.

Glossary (``P`` is the prefix). Every key of one queue carries the queue's hash tag
``{<queue>}``, so on a Redis Cluster the queue lives on one shard and each queue script
(whose keys are all of one queue) runs there; different queues spread over the shards:

* ``P:q:{<queue>}`` -- stream of work entries; consumer group :data:`GROUP`.
* ``P:q:{<queue>}:delayed`` -- zset of encoded messages scored by due time (ms).
* ``P:q:{<queue>}:dead`` -- dead-letter stream (capped, expires).
* ``P:q:{<queue>}:stats`` -- hash of the queue's cumulative counters, read by ``GET /metrics``
  (:mod:`tracebus.engine.metrics` lists its fields), written in the same script or MULTI as
  the event it counts. It has **no TTL on purpose**: it is system-wide state like the queue
  stream, a few fields whatever the load (never per message or worker), and Prometheus
  computes rates from its counters, which an expiry would reset. Deleting it by hand only
  resets the counters (Prometheus treats that as a counter reset).
* ``P:stats`` -- the same for the counters of no queue (``reclaims:<source>``), written by
  a lone HINCRBY; :meth:`tracebus.engine.broker.Broker.stats` sums all of them at read time.
* ``P:queues`` -- set of declared queue names.
* ``P:worker:<consumer>`` -- hash describing a live worker (expires).
* ``P:workers`` -- zset consumer -> last-seen ms, for listing workers.
* ``P:result:<message_id>`` -- list holding the msgpack outcome of a message whose actor
  stores results (``store_results=True``); expires after the actor's ``result_ttl_ms``.
  Its own slot: every command and MULTI on it names only it.
* ``P:paused`` -- set of paused queue names (no TTL on purpose: a pause lasts until an
  operator resumes the queue; one small set whatever the load). Its own slot: SADD, SREM
  and SMEMBERS name only it, so a worker reads every pause in one command on a cluster too.
* ``P:sched:<actor>:<tick>`` -- the lock of one tick of a periodic actor (expires; one
  ``SET NX EX``, its own slot).

No script or MULTI spans two of these groups (docs/keys.md maps every key and script).
"""

from __future__ import annotations

#: Name of the one consumer group on every work stream.
GROUP = "workers"


class Keys:
    """Key names under one prefix.

    Args:
        prefix(str): the namespace, e.g. ``"tracebus"``.
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    # -- queue ---------------------------------------------------------------------------------
    def stream(self, queue: str) -> str:
        return f"{self.prefix}:q:{{{queue}}}"

    def delayed(self, queue: str) -> str:
        return f"{self.prefix}:q:{{{queue}}}:delayed"

    def dead(self, queue: str) -> str:
        return f"{self.prefix}:q:{{{queue}}}:dead"

    def queues(self) -> str:
        return f"{self.prefix}:queues"

    # -- workers -------------------------------------------------------------------------------
    def worker(self, consumer: str) -> str:
        return f"{self.prefix}:worker:{consumer}"

    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def result(self, message_id: str) -> str:
        return f"{self.prefix}:result:{message_id}"

    def paused(self) -> str:
        """Set of paused queues (no TTL: see the glossary)."""
        return f"{self.prefix}:paused"

    def schedule_tick(self, name: str, tick_s: int) -> str:
        return f"{self.prefix}:sched:{name}:{tick_s}"

    def stats(self, queue: str | None = None) -> str:
        """Hash of one queue's cumulative counters, or of those of no queue (no TTL: see the
        glossary)."""
        if queue is None:
            return f"{self.prefix}:stats"
        return f"{self.prefix}:q:{{{queue}}}:stats"
