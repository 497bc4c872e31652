"""tracebus: background jobs for long, heavy database queries.

The public surface: the :func:`actor` decorator (Dramatiq-style) with ``send``,
``send_with_options`` and ``send_many``; :class:`Broker` and :func:`set_broker`;
:func:`on_worker_boot` for per-process resources; :func:`heartbeat` for long actors;
:class:`Message`, :class:`Settings` and the error hierarchy in :mod:`tracebus.errors`.
"""

from .actor import Actor, actor, get_broker, set_broker
from .boot import on_worker_boot
from .broker import Broker
from .config import Settings
from .message import Message
from .worker import heartbeat

__all__ = ["Actor", "actor", "get_broker", "set_broker", "on_worker_boot", "Broker", "Settings",
           "Message", "heartbeat"]
