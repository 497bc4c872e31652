"""tracebus: background jobs for long, heavy database queries.

Four layers, each a package that imports only the ones below it: :mod:`tracebus.engine`
(messages, actors, the Redis Streams broker, workers, the supervisor, middleware),
:mod:`tracebus.jobs` (a job as units: fenced results and partials, state, progress,
cancel, retry, quotas), the applications (:mod:`tracebus.trace`) and, on top, the HTTP API
(``api/``) and the CLI (:mod:`tracebus.cli`).

The public surface of the engine is re-exported here: the :func:`actor` decorator
(Dramatiq-style) with ``send``, ``send_with_options`` and ``send_many``; :class:`Broker`
and :func:`set_broker`; :func:`on_worker_boot` for per-process resources; :func:`heartbeat`
for long actors; :class:`Middleware`; :class:`Message` and :class:`Settings`.
"""

from tracebus.engine.actor import Actor, actor, get_broker, set_broker
from tracebus.engine.boot import on_worker_boot
from tracebus.engine.broker import Broker
from tracebus.engine.message import Message
from tracebus.engine.middleware import Middleware
from tracebus.engine.settings import Settings
from tracebus.engine.worker import heartbeat

__all__ = ["Actor", "actor", "get_broker", "set_broker", "on_worker_boot", "Broker", "Settings",
           "Message", "Middleware", "heartbeat"]
