"""``/api/v1/me``, ``/api/v1/states``, ``/api/v1/queues``, ``/api/v1/workers``, ``/api/v1/redis``:
what the web monitor polls (read-only; figures from :mod:`tracebus.engine.overview`, the states'
words from :mod:`tracebus.trace.states`).

Queues, workers and Redis health are shown to every caller, as ``GET /metrics`` shows them;
the jobs a caller sees are their own (``/api/v1/jobs``), and dead letters are for operators
(:mod:`api.resources.dead_letters`).
"""

from __future__ import annotations

import falcon

from tracebus.engine import overview
from tracebus.trace.owners import is_anonymous
from tracebus.trace.states import monitor_words


class Me:
    """Who the API takes the caller for, and whether they are an operator.

    Args:
        operators: the :class:`~api.operators.Operators` check.
    """

    def __init__(self, operators):
        self.operators = operators

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user = req.context.user
        resp.media = {"user": user, "anonymous": is_anonymous(user), "admin": self.operators.is_admin(user)}


class States:
    """The job states as the monitor shows them (:func:`tracebus.trace.states.monitor_words`), so
    that the page keeps no table of its own."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = monitor_words()


class Queues:
    """Every queue: waiting, pending, delayed and dead counts, lag, cumulative counters; and the
    source's sessions (places in use, units waiting, the cap).

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker`.
        queue(str): the trace queue, listed even before anything declared it.
        sessions: the :class:`~tracebus.jobs.places.Places` of the source's sessions.
    """

    def __init__(self, broker, queue: str, sessions):
        self.broker, self.queue, self.sessions = broker, queue, sessions

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        doc = overview.queues(self.broker, extra=(self.queue,))
        usage = self.sessions.usage()
        doc["source_sessions"] = {"in_use": usage.in_use, "waiting": usage.waiting,
                                  "max": usage.capacity or self.sessions.capacity}
        resp.media = doc


class Workers:
    """Live workers per host: current message, RSS, messages done, age.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker`.
        registry: the :class:`~tracebus.engine.registry.WorkerRegistry`.
    """

    def __init__(self, broker, registry):
        self.broker, self.registry = broker, registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = overview.workers_by_host(self.broker, self.registry)


class RedisHealth:
    """The Redis server: memory against maxmemory, eviction policy, persistence.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker` whose client is read.
    """

    def __init__(self, broker):
        self.broker = broker

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = overview.redis_health(self.broker.client)
