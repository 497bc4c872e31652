"""The Redis Streams broker: one stream per queue, one consumer group, one consumer per worker.

It enqueues (XADD, pipelined for bulk), delays (a zset per queue), reads (XREADGROUP with
BLOCK), acks (XACK + XDEL in one MULTI: the work stream is never MAXLEN-trimmed), retries
and dead-letters (Lua, atomic). Crash recovery (reclaim, janitor, lease renewal) lives in
:mod:`tracebus.engine.recovery` and uses the same client and scripts, through the
pending-entries operations (:mod:`tracebus.engine.pending`). The client, its dedicated
sockets and cluster slot routing are :mod:`tracebus.engine.wire`'s. Redis driver errors are
translated here into :class:`BrokerConnectionError`.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Sequence

import redis

from tracebus.engine.cluster_client import is_cluster
from tracebus.engine.scripts import ENGINE_SCRIPTS
from tracebus.engine.settings import Settings
from tracebus.engine.dead_letters import DeadLetters
from tracebus.engine.pending import PendingEntries, stream_gone
from tracebus.engine.queue_control import QueueControl
from tracebus.engine.redis_errors import translate_errors
from tracebus.engine.keys import GROUP, Keys
from tracebus.engine.message import Delivery, Message
from tracebus.engine.wire import Wire, check_redis_version, connect

log = logging.getLogger(__name__)


class Broker(Wire, PendingEntries, DeadLetters, QueueControl):
    """Queue operations on Redis Streams.

    Args:
        settings(Settings): redis URL, key prefix, delivery limits.
        client(redis.Redis): an existing client; one is created from settings when None.
    """

    def __init__(self, settings: Settings, client: redis.Redis | None = None):
        self.settings = settings
        self.client = client if client is not None else connect(settings)
        self.keys = Keys(settings.key_prefix)
        self._declared: set[str] = set()
        self._local = threading.local()  # .sockets: this thread's wire._ThreadSockets
        self._threads: weakref.WeakSet = weakref.WeakSet()  # every thread's, closed by close()
        self._cluster = is_cluster(self.client)
        self._turn = 0  # which queue a cluster fetch blocks on next
        self._checked = False
        self._scripts = {name: ENGINE_SCRIPTS.register(self.client, name)
                         for name in ("requeue", "autoclaim", "renew", "retry", "promote", "dead_letter",
                                     "dead_requeue", "purge", "delay", "forget_consumers")}
        self._queue_keys = {"stream": self.keys.stream, "delayed": self.keys.delayed,
                            "dead": self.keys.dead, "stats": self.keys.stats}

    def _queue_script(self, name: str, queue: str, /, **args):
        """Run the engine script ``<name>.lua`` on ``queue``'s keys.

        Its KEYS are the queue's keys its header names (stream, delayed, dead, stats: all of
        the queue's hash tag, one slot); of its ARGV, ``group``, ``queue``, ``default_max``,
        ``dead_maxlen`` and ``dead_ttl_s`` are filled in here when it declares them, the rest
        come from ``args``.
        """
        run = self._scripts[name]
        keys = {key: self._queue_keys[key](queue) for key in run.signature.key_names()}
        s = self.settings
        common = {"group": GROUP, "queue": queue, "default_max": s.max_deliveries,
                  "dead_maxlen": s.dead_maxlen, "dead_ttl_s": s.dead_ttl_s}
        declared = run.signature.arg_names()
        args.update({n: v for n, v in common.items() if n in declared and n not in args})
        return run(keys, args)

    # -- setup -----------------------------------------------------------------------------------
    @translate_errors
    def check_server(self) -> str:
        """Refuse a Redis older than 7.0 (every master of a cluster). Returns the server version."""
        nodes = ([n.redis_connection for n in self.client.get_primaries()] if self._cluster
                 else [self.client])
        for node in nodes:
            version = str(node.info("server")["redis_version"])
            check_redis_version(version, self.settings.redis_url)
        self._checked = True
        return version

    @translate_errors
    def declare_queue(self, queue: str) -> None:
        """Create the queue's stream and consumer group if missing (idempotent)."""
        if queue in self._declared:
            return
        if not self._checked:
            self.check_server()
        try:
            # id 0: entries added before the group existed are delivered too.
            self.client.xgroup_create(self.keys.stream(queue), GROUP, id="0", mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise
        self.client.sadd(self.keys.queues(), queue)
        self._declared.add(queue)

    @translate_errors
    def queues(self) -> list[str]:
        return sorted(q.decode() for q in self.client.smembers(self.keys.queues()))

    # -- producing -------------------------------------------------------------------------------
    def _xadd_args(self, message: Message) -> tuple:
        args = ("XADD", self.keys.stream(message.queue_name), "*", "m", message.encode())
        max_deliveries = message.options.get("max_deliveries")
        if max_deliveries and max_deliveries != self.settings.max_deliveries:
            args += ("x", int(max_deliveries))
        return args

    @translate_errors
    def ping(self) -> None:
        """PING through the client's pool and through the producer's own path (:meth:`~tracebus.engine.wire.Wire._dedicated`)."""
        self.client.ping()
        if not self._cluster:
            [reply] = self._pipelined([("PING",)])
            if isinstance(reply, Exception):
                raise reply

    @translate_errors
    def enqueue(self, message: Message, delay_ms: int | None = None) -> Message:
        """Send one message now, or after ``delay_ms`` through the delayed zset."""
        self.declare_queue(message.queue_name)
        if delay_ms:
            self._queue_script("delay", message.queue_name, delay_ms=int(delay_ms), payload=message.encode())
        else:
            self._pipelined([self._xadd_args(message)])
        return message

    @translate_errors
    def enqueue_many(self, messages: Sequence[Message]) -> Sequence[Message]:
        """Send many messages in one pipelined round trip."""
        for queue in {m.queue_name for m in messages}:
            self.declare_queue(queue)
        for start in range(0, len(messages), 1000):
            self._pipelined([self._xadd_args(m) for m in messages[start:start + 1000]])
        return messages

    # -- consuming -------------------------------------------------------------------------------
    @translate_errors
    def fetch(self, queues: Sequence[str], consumer: str, count: int, block_ms: int) -> list[Delivery]:
        """Read up to ``count`` new entries for ``consumer`` (blocking up to ``block_ms``)."""
        by_stream = {self.keys.stream(q).encode(): q for q in queues}
        try:
            if self._cluster and len(queues) > 1:
                reply = self._fetch_each(list(by_stream), consumer, count, block_ms)
            elif self._cluster:  # one queue (one slot) of a cluster, on its master
                client = self._slot_client(next(iter(by_stream)))
                reply = self._on_slot(client.xreadgroup, GROUP, consumer, dict.fromkeys(by_stream, ">"),
                                      count=count, block=block_ms)
            else:
                reply = self._read_group(consumer, by_stream, count, block_ms)
        except redis.ResponseError as e:
            if not stream_gone(e):
                raise
            # Someone deleted the stream or its group: recreate it instead of crash-looping.
            log.warning("queue stream missing (%s); declaring it again", e)
            self._declared.difference_update(queues)
            for q in queues:
                self.declare_queue(q)
            return []
        deliveries = []
        for stream_name, entries in reply or ():
            queue = by_stream[stream_name]
            for entry_id, fields in entries:
                deliveries.append(_delivery(queue, entry_id, fields))
        return deliveries

    def _fetch_each(self, streams: list[bytes], consumer: str, count: int, block_ms: int) -> list:
        """XREADGROUP over queues on different cluster slots: one command per queue.

        One XREADGROUP cannot name streams of two slots (CROSSSLOT), so each round reads every
        queue without blocking (one pipeline per node); only when all are empty does it
        block, on one queue at a time (taking turns) for a short slice, so an entry in
        another queue waits at most a slice (<= 100 ms / number of queues).
        """
        deadline = time.monotonic() + block_ms / 1000
        slice_ms = max(1, min(block_ms, 100) // len(streams))
        by_node: dict = {}
        for stream in streams:
            by_node.setdefault(self._slot_client(stream), []).append(stream)
        while True:
            reply = []
            for client, own in by_node.items():
                pipe = client.pipeline(transaction=False)
                for stream in own:
                    pipe.xreadgroup(GROUP, consumer, {stream: ">"}, count=count)
                reply += [part for answer in self._on_slot(pipe.execute) for part in (answer or ())]
            if reply or time.monotonic() >= deadline:
                return reply
            self._turn = (self._turn + 1) % len(streams)
            stream = streams[self._turn]
            reply = self._on_slot(self._slot_client(stream).xreadgroup, GROUP, consumer, {stream: ">"},
                                  count=count, block=slice_ms)
            if reply:
                return reply

    @translate_errors
    def ack(self, queue: str, entry_ids: Sequence[str]) -> None:
        """Acknowledge and delete entries in one MULTI (batched acks), counting them as
        processed in the stats hash in the same round trip."""
        if not entry_ids:
            return
        stream = self.keys.stream(queue)
        pipe = self._slot_client(stream).pipeline(transaction=True)
        pipe.xack(stream, GROUP, *entry_ids)
        pipe.xdel(stream, *entry_ids)
        pipe.hincrby(self.keys.stats(queue), f"processed:{queue}", len(entry_ids))
        try:
            self._on_slot(pipe.execute)
        except redis.exceptions.OutOfMemoryError:
            # Redis is full: it refuses the whole MULTI for the counter, which may grow memory;
            # XACK and XDEL only free some, so ack uncounted rather than redeliver.
            client = self._slot_client(stream)
            self._on_slot(client.xack, stream, GROUP, *entry_ids)
            self._on_slot(client.xdel, stream, *entry_ids)

    @translate_errors
    def retry_later(self, delivery: Delivery, message: Message, delay_ms: int) -> None:
        """Ack ``delivery`` and schedule ``message`` (the retry copy) after ``delay_ms``."""
        queue = delivery.queue_name
        self._queue_script("retry", queue, entry=delivery.entry_id, delay_ms=int(delay_ms),
                           payload=message.encode())

    @translate_errors
    def dead_letter(self, delivery: Delivery, reason: str, failed: bool = False) -> None:
        """Move a running entry to the queue's dead-letter stream, with ``reason``.

        Args:
            failed(bool): the actor ran and raised (counted as a failed message too).
        """
        queue = delivery.queue_name
        self._queue_script("dead_letter", queue, entry=delivery.entry_id, payload=delivery.raw,
                           reason=reason[:4000], failed=int(failed))

    # -- delayed ---------------------------------------------------------------------------------
    @translate_errors
    def promote_due(self, queue: str, limit: int = 1000) -> int:
        """Move delayed messages whose time has come onto the queue's stream."""
        return int(self._queue_script("promote", queue, limit=limit))

    # -- counters and inspection -----------------------------------------------------------------
    @translate_errors
    def count(self, field: str, by: int = 1) -> None:
        """Add ``by`` to one counter of the stats hash (see :mod:`tracebus.engine.metrics`)."""
        self.client.hincrby(self.keys.stats(), field, by)

    @translate_errors
    def stats(self) -> dict[str, int]:
        """The engine's cumulative counters (:mod:`tracebus.engine.metrics`): the stats hash of
        every declared queue and the one of no queue, summed at read time."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.stats())
        for queue in self.queues():
            pipe.hgetall(self.keys.stats(queue))
        total: dict[str, int] = {}
        for stats in pipe.execute():
            for k, v in stats.items():
                total[k.decode()] = total.get(k.decode(), 0) + int(v)
        return total

    @translate_errors
    def queue_stats(self, queue: str) -> dict:
        """Length, pending, delayed and dead counts of one queue."""
        stream = self.keys.stream(queue)
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(stream)
        pipe.xpending(stream, GROUP)
        pipe.zcard(self.keys.delayed(queue))
        pipe.xlen(self.keys.dead(queue))
        try:
            length, pending, delayed, dead = pipe.execute()
        except redis.ResponseError:  # NOGROUP: queue never declared
            return {"queue": queue, "length": 0, "pending": 0, "delayed": 0, "dead": 0}
        pending_count = pending["pending"] if isinstance(pending, dict) else 0
        # Entries stay in the stream until acked, so "waiting" excludes the pending ones.
        return {"queue": queue, "length": length - pending_count, "pending": pending_count,
                "delayed": delayed, "dead": dead}

    def close(self) -> None:
        self._close_sockets()
        self.client.close()


def _delivery(queue: str, entry_id: bytes, fields: dict) -> Delivery:
    raw = fields.get(b"m", b"")
    prior = int(fields.get(b"d", 0))
    try:
        message = Message.decode(raw)
    except Exception:  # DecodeError: the worker dead-letters it
        message = None
    return Delivery(queue, entry_id.decode(), message, raw, prior)
