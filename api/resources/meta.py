"""Probes and the API description: ``/healthz``, ``/readyz``, ``/openapi.json``.

These are open even when bearer tokens are configured (``auth_required = False``):
load balancers and systemd probes carry no token.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import falcon

from tracebus.engine.redis_memory import memory_state

#: A source's answer to /readyz is kept this long: a probe every second opens no more sessions.
SOURCE_CHECK_EVERY_S = 5.0


class Health:
    """Liveness: the process answers HTTP. Touches nothing else (no Redis)."""

    auth_required = False
    enveloped = False  # probes read the bare body, whatever TRACEBUS_API_ENVELOPE says

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


class SourceCheck:
    """The event source's state for /readyz, asked of the server at most every
    :data:`SOURCE_CHECK_EVERY_S` seconds: ``ok``, ``embedded`` or ``unreachable: <why>``.

    Args:
        ping: connects to the source's server and runs a trivial statement (raises when it
            cannot); returns False for an embedded source (no server to reach).
    """

    def __init__(self, ping: Callable[[], bool]):
        self.ping = ping
        self._lock = threading.Lock()
        self._state, self._at = "", float("-inf")

    def state(self) -> str:
        with self._lock:
            if time.monotonic() - self._at < SOURCE_CHECK_EVERY_S:
                return self._state
            try:
                self._state = "ok" if self.ping() else "embedded"
            except Exception as e:  # any failure to reach the source is "not ready", never a 500
                self._state = f"unreachable: {e}"
            self._at = time.monotonic()
            return self._state


class Ready:
    """Readiness: Redis answers PING, is not full, a live worker reads the trace queue, and the
    event source's server (PostgreSQL, Oracle) takes a connection.

    A full Redis (maxmemory reached, noeviction) is "not ready" with ``missing`` naming
    ``redis_memory`` and ``redis`` saying "full: ...": it answers reads but refuses jobs.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker` (its client is pinged).
        registry: the :class:`~tracebus.engine.registry.WorkerRegistry` of live workers.
        queue(str): the queue trace units go to.
        retry_after_s(int): the ``Retry-After`` of a 503.
        source(SourceCheck | None): the event source's check (None: not checked).
    """

    auth_required = False
    enveloped = False

    def __init__(self, broker, registry, queue: str, retry_after_s: int, source: SourceCheck | None = None):
        self.broker, self.registry, self.queue = broker, registry, queue
        self.retry_after_s = retry_after_s
        self.source = source

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        missing, workers = [], 0
        try:
            self.broker.ping()  # the pool and the producer's path both: a submit needs each
            workers = sum(1 for w in self.registry.list()
                          if self.queue in w.get("queues", "").split(","))
            memory = memory_state(self.broker.client)
            redis_state = f"full: {memory.describe()}" if memory.full else "ok"
            if memory.full:
                missing.append("redis_memory")
        except Exception as e:  # any failure to reach Redis means "not ready", never a 500
            redis_state = f"unreachable: {e}"
            missing.append("redis")
        if not workers and not missing:
            missing.append("workers")
        media = {"redis": redis_state, "workers": workers, "queue": self.queue}
        if self.source is not None:
            media["source"] = self.source.state()
            if media["source"].startswith("unreachable"):
                missing.append("source")
        resp.media = {"status": "not ready" if missing else "ready", "missing": missing, **media}
        if missing:
            resp.status = falcon.HTTP_503
            resp.set_header("Retry-After", str(self.retry_after_s))


class OpenApi:
    """The OpenAPI 3 document of this API.

    Args:
        document(dict): built once by :func:`api.openapi.document`.
    """

    auth_required = False
    enveloped = False  # tools read it as an OpenAPI document, whatever TRACEBUS_API_ENVELOPE says

    def __init__(self, document: dict):
        self.document = document

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.document


