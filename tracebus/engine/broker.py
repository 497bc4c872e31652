"""The Redis Streams broker: one stream per queue, one consumer group, one consumer per worker.

It enqueues (XADD, pipelined for bulk), delays (a zset per queue), reads (XREADGROUP with
BLOCK), acks (XACK + XDEL in one MULTI: the work stream is never MAXLEN-trimmed), retries
and dead-letters (Lua, atomic). Crash recovery (reclaim, janitor, lease renewal) lives in
:mod:`tracebus.engine.recovery` and uses the same client and scripts. Redis driver errors are
translated here into :class:`BrokerConnectionError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from typing import Iterable, Iterator, Sequence

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracebus.engine.cluster_client import is_cluster
from tracebus.engine.connection import PrimaryMoved, redact, redis_client, topology
from tracebus.engine.scripts import ENGINE_SCRIPTS
from tracebus.engine.settings import Settings
from tracebus.engine.errors import DecodeError, UnsupportedRedis
from tracebus.engine.dead_letters import DeadLetters
from tracebus.engine.queue_control import QueueControl
from tracebus.engine.redis_errors import translate_errors
from tracebus.engine.keys import GROUP, Keys
from tracebus.engine.message import Delivery, Message

log = logging.getLogger(__name__)

#: Oldest Redis that has everything we use (XAUTOCLAIM's deleted-ids reply, XPENDING IDLE).
MIN_REDIS = (7, 0)


def check_redis_version(version: str, url: str) -> None:
    """Refuse a server older than :data:`MIN_REDIS` (a pure function of INFO's ``redis_version``).

    Raises:
        UnsupportedRedis: the version is older, or cannot be read.
    """
    url = redact(url)  # the message reaches logs and errors: never the password
    try:
        parts = tuple(int(p.split("-")[0]) for p in version.split(".")[:2])
    except ValueError:
        parts = ()
    if len(parts) < 2:
        raise UnsupportedRedis(f"cannot read the version {version!r} of Redis at {url}")
    if parts < MIN_REDIS:
        raise UnsupportedRedis(
            f"Redis {version} at {url} is too old: tracebus needs "
            f"{MIN_REDIS[0]}.{MIN_REDIS[1]} or newer (XAUTOCLAIM, XPENDING IDLE)")


def connect(settings: Settings, block_ms: int | None = None, fail_fast: bool = False) -> redis.Redis:
    """A client for ``settings.redis_url`` (one node, Sentinel or a cluster: the URL's scheme
    decides, :func:`tracebus.engine.connection.redis_client`) whose socket timeout exceeds
    the XREADGROUP block.

    Args:
        fail_fast(bool): never retry a command inside redis-py (the worker's client). A
            retry after a failover lands on the new primary while the unit's earlier writes
            were lost with the old one; failing instead makes the worker redo the whole unit.
            For the same reason its Sentinel connections never move to a new primary silently.
    """
    block_s = (block_ms if block_ms is not None else settings.block_ms) / 1000
    if fail_fast:
        options = {"retry": Retry(NoBackoff(), 0), "strict_primary": True}
    elif topology(settings.redis_url) != "cluster":  # a cluster client retries MOVED/ASK its own way
        # Once, on a dropped connection (a restarted Redis); never on a timeout, which would
        # multiply the wait on a frozen Redis (redis-py's default: 3 retries with backoff).
        options = {"retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))}
    else:
        options = {}
    # Bounded so a frozen Redis is an error in seconds (the API answers 503 within about
    # TRACEBUS_REDIS_TIMEOUT_SECONDS), yet above every BLOCK this client's reads use.
    return redis_client(settings.redis_url, socket_timeout=max(settings.redis_timeout_s, block_s + 2),
                        socket_connect_timeout=settings.redis_timeout_s, health_check_interval=30,
                        **options)


class Broker(DeadLetters, QueueControl):
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
        self._local = threading.local()  # .sockets: this thread's _ThreadSockets
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

    @contextlib.contextmanager
    def _dedicated(self, role: str) -> Iterator[redis.connection.AbstractConnection]:
        """The connection of one exchange of the producer (``role`` "send") or the reader ("read").

        On threads: this thread's own socket for ``role``, apart from the pool, closed when the
        thread ends. The worker's strict client needs it so: after a failover the socket a
        unit sent on fails once (:class:`tracebus.engine.connection.PrimaryConnection`), while
        the pool would hand the unit another one already on the new primary.

        Under gevent a thread-local is per greenlet: every API request kept a socket of its
        own, made by the pool, counted against its cap and never released (submits stopped
        after ~100 callers, issue 24). There the connection is checked out of the pool for
        the exchange and given back (the API's client is not strict).
        """
        if _greenlets():
            pool = self.client.connection_pool
            conn = pool.get_connection()
            try:
                yield conn
            finally:
                pool.release(conn)
            return
        own = getattr(self._local, "sockets", None)
        if own is None or own.pid != os.getpid():  # a new thread, or forked: the parent's are not ours
            own = self._local.sockets = _ThreadSockets(self.client.connection_pool)
            self._threads.add(own)
        conn = own.get(role)
        yield conn

    def _pipelined(self, commands: list[tuple]) -> list:
        """Send commands on a dedicated connection (:meth:`_dedicated`) and read every reply.

        The producer path bypasses redis-py's per-call machinery (retry wrapper, command
        packing, observability hooks), which costs more than the round trip itself:
        measured here, 7,000 XADD/s through ``client.xadd`` against 16,000/s this way.
        A cluster client routes each command to its slot's node in its own pipeline.
        """
        if self._cluster:
            pipe = self.client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return pipe.execute()
        # hiredis packs the whole batch in C: redis-py's pack_commands costs ~25 us a command.
        packed = [b"".join([hiredis.pack_command(command) for command in commands])]
        with self._dedicated("send") as conn:
            try:
                conn.connect()  # no-op when connected; a Sentinel connection asks for the master here
                conn.send_packed_command(packed, check_health=False)
            except PrimaryMoved:
                raise  # never resent: the messages would reach a primary the unit's state did not
            except redis.ConnectionError:
                conn.disconnect()  # stale socket (server restarted): nothing was sent, so resend once
                conn.connect()
                conn.send_packed_command(packed, check_health=False)
            try:
                return [conn.read_response() for _ in commands]
            except BaseException:
                conn.disconnect()  # replies may be left unread: never reuse this socket half-read
                raise

    @translate_errors
    def ping(self) -> None:
        """PING through the client's pool and through the producer's own path (:meth:`_dedicated`)."""
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

    def _slot_client(self, key):
        """The client to run single-slot commands on ``key`` with: on a cluster, the plain
        client of the master that owns the key's slot, which skips the cluster client's
        per-command routing (it tripled the worker's CPU per message); else the client."""
        if not self._cluster:
            return self.client
        return self.client.get_node_from_key(key).redis_connection

    def _on_slot(self, fn, *args, **kwargs):
        """Run ``fn`` against a slot's master; a MOVED/ASK (slots resharded or failed over)
        or a dropped node refreshes the cluster client's slot map before the error goes up,
        so the next call goes to the new owner."""
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError):
            self._refresh_slots()
            raise
        except redis.ResponseError as e:
            if str(e).startswith(("MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN")):
                self._refresh_slots()
            raise

    def _refresh_slots(self) -> None:
        if self._cluster:
            try:
                self.client.nodes_manager.initialize()
            except Exception as e:  # no node answers: the error that brought us here goes up
                log.debug("cluster slot map not refreshed: %s", e)

    def _read_group(self, consumer: str, streams, count: int, block_ms: int):
        """XREADGROUP on a dedicated connection (:meth:`_dedicated`), never retried by redis-py.

        A retried XREADGROUP whose first reply was lost would leave the entries it delivered
        pending for this consumer with nobody running them; failing instead lets the worker
        notice the outage and requeue its own pending entries when Redis is back.
        """
        args = ["XREADGROUP", "GROUP", GROUP, consumer, "COUNT", count, "BLOCK", block_ms, "STREAMS",
                *streams, *([">"] * len(streams))]
        with self._dedicated("read") as conn:
            try:
                conn.connect()  # as in _pipelined: where a Sentinel connection finds the master
                conn.send_command(*args, check_health=False)
                return self.client.parse_response(conn, "XREADGROUP")
            except redis.ResponseError:  # an error reply was read whole: the socket is fine
                raise
            except BaseException:
                conn.disconnect()  # a half-read reply must never be read as the next one's
                raise

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

    @translate_errors
    def give_back(self, queue: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Requeue entries this consumer read but never started, without counting the delivery."""
        if entry_ids:
            self.requeue_pending(queue, consumer, "given back unstarted", uncount=True, only=entry_ids)

    @translate_errors
    def requeue_pending(self, queue: str, consumer: str, reason: str, uncount: bool = False,
                        only: Iterable[str] = (), batch: int = 100) -> tuple[int, int, int]:
        """Requeue (or dead-letter past max deliveries) the pending entries of ``consumer``.

        Requeued entries count as redeliveries by the supervisor in the stats hash, unless
        ``uncount`` (entries given back unstarted are not redelivered work).

        Returns:
            (requeued, dead_lettered, deleted) counts.
        """
        totals = [0, 0, 0]
        only = list(only)
        source = "" if uncount else "supervisor"
        while True:
            try:
                requeued, dead, deleted, left = self._queue_script(
                    "requeue", queue, consumer=consumer, count=batch, reason=reason, uncount=int(uncount),
                    source=source, ids=only)
            except redis.ResponseError as e:
                if stream_gone(e):  # nothing pending can exist without the stream
                    return tuple(totals)
                raise
            totals = [totals[0] + requeued, totals[1] + dead, totals[2] + deleted]
            if only or not left or (requeued + dead + deleted) == 0:
                return tuple(totals)

    @translate_errors
    def delete_consumer(self, queue: str, consumer: str) -> None:
        try:
            self.client.xgroup_delconsumer(self.keys.stream(queue), GROUP, consumer)
        except redis.ResponseError as e:
            if not stream_gone(e):
                raise

    # -- delayed ---------------------------------------------------------------------------------
    @translate_errors
    def promote_due(self, queue: str, limit: int = 1000) -> int:
        """Move delayed messages whose time has come onto the queue's stream."""
        return int(self._queue_script("promote", queue, limit=limit))

    # -- recovery (used by tracebus.engine.recovery) -------------------------------------------
    @translate_errors
    def renew(self, queue: str, consumer: str, count: int = 1000) -> int:
        """Reset the idle time of the entries ``consumer`` holds in ``queue`` (XCLAIM JUSTID,
        no delivery counted). Returns how many; 0 when the stream is gone."""
        try:
            return int(self._queue_script("renew", queue, consumer=consumer, count=count))
        except redis.ResponseError as e:
            if not stream_gone(e):  # a deleted stream holds no leases
                raise
            return 0

    @translate_errors
    def autoclaim(self, queue: str, consumer: str, cursor: str,
                  count: int) -> tuple[str, int, int, int] | None:
        """One XAUTOCLAIM round over ``queue``: requeue entries idle past the claim time,
        dead-letter those past their delivery limit.

        Returns:
            (next cursor, requeued, dead-lettered, deleted-while-pending), or None when the
            stream is gone.
        """
        try:
            nxt, requeued, dead, deleted = self._queue_script(
                "autoclaim", queue, consumer=consumer, min_idle_ms=self.settings.claim_min_idle_ms,
                cursor=cursor, count=count)
        except redis.ResponseError as e:
            if not stream_gone(e):
                raise
            return None
        return (nxt.decode() if isinstance(nxt, bytes) else str(nxt)), int(requeued), int(dead), int(deleted)

    @translate_errors
    def forget_consumers(self, queue: str, min_idle_ms: int) -> int:
        """Remove the consumers of ``queue`` that hold nothing and have not read for
        ``min_idle_ms`` (gone hosts and processes). Returns how many."""
        try:
            return int(self._queue_script("forget_consumers", queue, min_idle_ms=int(min_idle_ms)))
        except redis.ResponseError as e:
            if not stream_gone(e):
                raise
            return 0

    @translate_errors
    def count(self, field: str, by: int = 1) -> None:
        """Add ``by`` to one counter of the stats hash (see :mod:`tracebus.engine.metrics`)."""
        self.client.hincrby(self.keys.stats(), field, by)

    @translate_errors
    def held_entries(self, queue: str, consumer: str, count: int = 10) -> list[Message | None]:
        """The first messages ``consumer`` holds in ``queue`` (None for an undecodable one)."""
        stream = self.keys.stream(queue)
        out = []
        for entry in self.client.xpending_range(stream, GROUP, "-", "+", count, consumername=consumer):
            found = self.client.xrange(stream, entry["message_id"], entry["message_id"])
            if found:
                try:
                    out.append(Message.decode(found[0][1].get(b"m", b"")))
                except DecodeError:
                    out.append(None)
        return out

    # -- inspection ------------------------------------------------------------------------------
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
        for own in list(self._threads):
            own.close()
        self.client.close()


class _ThreadSockets:
    """One thread's producer and reader sockets (:meth:`Broker._dedicated`), made apart from
    the pool and closed when the thread ends (its thread-local, the only reference, goes)."""

    def __init__(self, pool):
        self.pool, self.pid, self.conns = pool, os.getpid(), {}

    def get(self, role: str):
        conn = self.conns.get(role)
        if conn is None:
            conn = self.conns[role] = self.pool.connection_class(**self.pool.connection_kwargs)
        return conn

    def close(self) -> None:
        if self.pid == os.getpid():  # never a forked parent's sockets, which the parent still uses
            for conn in self.conns.values():
                conn.disconnect()

    __del__ = close


def _greenlets() -> bool:
    """True when gevent has patched ``threading`` here (the API's gevent workers)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def stream_gone(error: redis.ResponseError) -> bool:
    """True for the errors Redis gives when a stream or its group was deleted under us."""
    text = str(error)
    return text.startswith("NOGROUP") or text.startswith("UNBLOCKED")


def _delivery(queue: str, entry_id: bytes, fields: dict) -> Delivery:
    raw = fields.get(b"m", b"")
    prior = int(fields.get(b"d", 0))
    try:
        message = Message.decode(raw)
    except Exception:  # DecodeError: the worker dead-letters it
        message = None
    return Delivery(queue, entry_id.decode(), message, raw, prior)
