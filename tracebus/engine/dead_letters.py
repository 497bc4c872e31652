"""Inspecting and handling the dead-letter streams (``tracebus dead list|requeue|purge`` and
``/api/v1/dead-letters[/requeue|/purge]``).

A mixin of :class:`tracebus.engine.broker.Broker`, kept apart because operators use it, not
the message path: list the records of a queue's dead-letter stream, put some back on their
queue (once each, atomically, with ``dead_requeue.lua``), or purge them. The operations the
command line and the API share (:func:`known_queues`, :func:`record`, :func:`requeue`,
:func:`purge`) are here, so both answer alike.
"""

from __future__ import annotations

import logging
from typing import Sequence

from tracebus.engine.errors import DecodeError
from tracebus.engine.message import Message
from tracebus.engine.redis_errors import translate_errors
from tracebus.logs import message_fields

log = logging.getLogger(__name__)


def describe(payload: bytes) -> dict:
    """What a dead record's payload says: actor, message id, args and the job it belongs to
    (the fields an actor's log describer adds, when its module is imported)."""
    if not payload:
        return {"actor": None, "message_id": None, "args": None}
    try:
        message = Message.decode(payload)
    except DecodeError:
        return {"actor": "(undecodable)", "message_id": None, "args": None}
    return {**message_fields(message), "args": list(message.args),
            "retries": message.options.get("retries", 0)}


def known_queues(broker, queue: str) -> list[str]:
    """Every declared queue, plus ``queue`` (the trace queue) even before anything declared it."""
    return sorted(set(broker.queues()) | {queue})


def record(queue: str, entry: dict) -> dict:
    """A dead entry of ``queue`` as operators read it: its id, when it died (epoch s), deliveries,
    the full reason, and what its payload says (:func:`describe`)."""
    return {"queue": queue, "id": entry["id"], "time": int(entry["id"].split("-")[0]) / 1000,
            "deliveries": entry["deliveries"], "reason": entry["reason"], **describe(entry["payload"])}


def requeue(broker, queue: str, ids: Sequence[str] | None) -> list[dict]:
    """Send the dead records ``ids`` of ``queue`` (None: all of them) back to it, each at most
    once: per id ``{"id", "requeued_as"}`` or ``{"id", "skipped": reason}``
    (:meth:`DeadLetters.requeue_dead`)."""
    if ids is None:
        ids = [e["id"] for e in broker.dead_entries(queue, count=None)]
    return broker.requeue_dead(queue, ids) if ids else []


def purge(broker, queue: str, ids: Sequence[str] | None) -> tuple[int, list[str]]:
    """Delete the dead records ``ids`` of ``queue`` (None: all of them): (how many were deleted,
    the ids of no record of ``queue``)."""
    if ids is None:
        return broker.purge_dead(queue), []
    present = {e["id"] for e in broker.dead_entries(queue, count=None)}
    return broker.purge_dead(queue, [i for i in ids if i in present]), [i for i in ids if i not in present]


class DeadLetters:
    """Dead-letter operations; expects ``client``, ``keys``, ``settings`` and ``_queue_script``."""

    @translate_errors
    def dead_entries(self, queue: str, count: int = 100) -> list[dict]:
        """The newest dead-letter records of ``queue``."""
        out = []
        for entry_id, fields in self.client.xrevrange(self.keys.dead(queue), count=count):
            record = {k.decode(): v for k, v in fields.items()}
            out.append({"id": entry_id.decode(), "reason": record.get("reason", b"").decode(errors="replace"),
                        "payload": record.get("m", b""),
                        "deliveries": int(record.get("deliveries", 0) or 0)})
        return out

    @translate_errors
    def requeue_dead(self, queue: str, entry_ids: Sequence[str]) -> list[dict]:
        """Send dead-lettered messages of ``queue`` back to it, each at most once.

        A message goes back with its retry count reset and a fresh delivery count (an
        operator requeues after fixing the cause, so it gets a full set of tries), and
        keeps its ``message_id``; its dead record is deleted in the same Lua call.

        Returns:
            list[dict]: per id, ``{"id", "requeued_as"}`` or ``{"id", "skipped"}`` with the
            reason (``missing``: no such record in this queue; the record has no payload or
            an undecodable one).
        """
        self.declare_queue(queue)
        dead = self.keys.dead(queue)
        out = []
        for entry_id in entry_ids:
            found = self.client.xrange(dead, entry_id, entry_id)
            payload = found[0][1].get(b"m", b"") if found else None
            if not payload:
                out.append({"id": entry_id, "skipped": "missing" if payload is None else "no payload"})
                continue
            try:
                message = Message.decode(payload).copy(options={"retries": 0})
            except DecodeError:
                out.append({"id": entry_id, "skipped": "undecodable payload"})
                continue
            max_deliveries = message.options.get("max_deliveries")
            own_limit = max_deliveries and max_deliveries != self.settings.max_deliveries
            extra = int(max_deliveries) if own_limit else ""
            new_id = self._queue_script("dead_requeue", queue, dead_id=entry_id, payload=message.encode(),
                                        max=extra)
            if new_id:
                log.info("dead message %s (%s) requeued on %s", message.message_id, message.actor_name,
                         queue, extra={"message_id": message.message_id, "actor": message.actor_name})
                out.append({"id": entry_id, "requeued_as": new_id.decode()})
            else:
                out.append({"id": entry_id, "skipped": "missing"})
        return out

    @translate_errors
    def purge_dead(self, queue: str, entry_ids: Sequence[str] | None = None) -> int:
        """Delete dead-letter records of ``queue``: the listed ids, or all when None.

        Returns:
            int: records deleted.
        """
        dead = self.keys.dead(queue)
        if entry_ids is not None:
            return int(self.client.xdel(dead, *entry_ids)) if entry_ids else 0
        pipe = self.client.pipeline(transaction=True)
        pipe.xlen(dead)
        pipe.delete(dead)
        return int(pipe.execute()[0])
