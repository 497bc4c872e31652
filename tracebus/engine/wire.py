"""The broker's link to Redis: the client, and the paths that bypass redis-py's per-call machinery.

:func:`connect` makes the client (one node, Sentinel or a cluster) with a socket timeout above
every XREADGROUP block, and :func:`check_redis_version` refuses a server too old for the
broker's commands. :class:`Wire`, a mixin of :class:`tracebus.engine.broker.Broker`, holds the
hot paths of producing and consuming: each thread's own producer and reader sockets
(:meth:`Wire._dedicated`), pipelined sends packed by hiredis (:meth:`Wire._pipelined`), the
XREADGROUP that redis-py never retries (:meth:`Wire._read_group`), and on a cluster the routing
of single-slot commands straight to the slot's master (:meth:`Wire._slot_client`,
:meth:`Wire._on_slot`). The broker's queue operations are written on top of these.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Iterator

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracebus.engine.connection import PrimaryMoved, redact, redis_client, topology
from tracebus.engine.errors import UnsupportedRedis
from tracebus.engine.keys import GROUP
from tracebus.engine.settings import Settings

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


class Wire:
    """Dedicated sockets, pipelined sends, the raw XREADGROUP and cluster slot routing.

    Expects ``client``, ``_cluster`` (the client is a cluster client), ``_local`` (a
    ``threading.local``) and ``_threads`` (a ``weakref.WeakSet`` of every thread's sockets),
    which :class:`tracebus.engine.broker.Broker` sets.
    """

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

    def _close_sockets(self) -> None:
        """Close every thread's dedicated sockets (those of this process)."""
        for own in list(self._threads):
            own.close()


class _ThreadSockets:
    """One thread's producer and reader sockets (:meth:`Wire._dedicated`), made apart from
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
