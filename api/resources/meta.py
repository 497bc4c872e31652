"""Probes and the API description: ``/healthz``, ``/readyz``, ``/openapi.json``.

These are open even when bearer tokens are configured (``auth_required = False``):
load balancers and systemd probes carry no token.
"""

from __future__ import annotations

import falcon

from tracebus.engine.redis_memory import memory_state


class Health:
    """Liveness: the process answers HTTP. Touches nothing else (no Redis)."""

    auth_required = False
    enveloped = False  # probes read the bare body, whatever TRACEBUS_API_ENVELOPE says

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


class Ready:
    """Readiness: Redis answers PING, is not full, and a live worker reads the trace queue.

    A full Redis (maxmemory reached, noeviction) is "not ready" with ``missing`` naming
    ``redis_memory`` and ``redis`` saying "full: ...": it answers reads but refuses jobs.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker` (its client is pinged).
        registry: the :class:`~tracebus.engine.registry.WorkerRegistry` of live workers.
        queue(str): the queue trace units go to.
        retry_after_s(int): the ``Retry-After`` of a 503.
    """

    auth_required = False
    enveloped = False

    def __init__(self, broker, registry, queue: str, retry_after_s: int):
        self.broker, self.registry, self.queue = broker, registry, queue
        self.retry_after_s = retry_after_s

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
        resp.media = {"status": "not ready" if missing else "ready", "missing": missing,
                      "redis": redis_state, "workers": workers, "queue": self.queue}
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


