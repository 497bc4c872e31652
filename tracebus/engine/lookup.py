"""Where a message is now, by its ``message_id`` (``tracebus message ID``).

Nothing is written per message to make this possible (the hot path stays one XADD and one
ACK): the lookup scans, for an operator's occasional question. It looks for the id's bytes
in each queue's stream (in batches), delayed set and dead-letter stream, decoding only the
entries that contain them, and reads the stored result of actors with ``store_results``.
States: ``queued``, ``running`` (pending in the group, with its consumer), ``delayed`` (a
retry or a ``delay``), ``dead``, ``done`` / ``failed`` (a stored result).
"""

from __future__ import annotations

from typing import Iterable

from tracebus.engine.errors import DecodeError, MessageNotFound, ResultFailure
from tracebus.engine.keys import GROUP
from tracebus.engine.message import Message
from tracebus.engine.middleware.results import decode as decode_result
from tracebus.engine.redis_errors import redis_errors

_BATCH = 1000


def _describe(message: Message) -> dict:
    return {"message_id": message.message_id, "actor": message.actor_name, "queue": message.queue_name,
            "args": list(message.args), "kwargs": message.kwargs,
            "retries": message.options.get("retries", 0), "enqueued_ms": message.message_timestamp_ms}


def _scan_stream(client, key: str, needle: bytes):
    """(entry id, fields) of the first entry of ``key`` whose payload holds ``needle``."""
    start = "-"
    while True:
        entries = client.xrange(key, start, "+", count=_BATCH)
        for entry_id, fields in entries:
            if needle in fields.get(b"m", b""):
                return entry_id.decode(), fields
        if len(entries) < _BATCH:
            return None
        start = "(" + entries[-1][0].decode()


def _scan_delayed(client, key: str, needle: bytes):
    for member, score in client.zscan_iter(key, count=_BATCH):
        if needle in member:
            return member, int(score)
    return None


def _decoded(raw: bytes) -> Message | None:
    try:
        return Message.decode(raw)
    except DecodeError:
        return None


def locate(broker, message_id: str, queues: Iterable[str]) -> dict:
    """The state of message ``message_id`` in ``queues``.

    Returns:
        dict: ``state``, ``deliveries`` and the message's fields; ``consumer`` when running,
        ``due_ms`` when delayed, ``reason`` when dead, ``result`` or ``error`` when stored.

    Raises:
        MessageNotFound: it is nowhere (finished without a stored result, expired, never sent).
    """
    needle, keys, client = message_id.encode(), broker.keys, broker.client
    found: dict = {}
    with redis_errors():
        for queue in queues:
            hit = _scan_stream(client, keys.stream(queue), needle)
            if hit is not None:
                entry_id, fields = hit
                message = _decoded(fields.get(b"m", b""))
                prior = int(fields.get(b"d", 0))
                pending = client.xpending_range(keys.stream(queue), GROUP, entry_id, entry_id, 1)
                found = {**(_describe(message) if message else {}), "state": "queued", "deliveries": prior,
                         "entry_id": entry_id}
                if pending:
                    found.update(state="running", consumer=pending[0]["consumer"].decode(),
                                 deliveries=prior + int(pending[0]["times_delivered"]))
                break
            hit = _scan_delayed(client, keys.delayed(queue), needle)
            if hit is not None:
                message = _decoded(hit[0])
                found = {**(_describe(message) if message else {}), "state": "delayed", "due_ms": hit[1],
                         "deliveries": None}
                break
            hit = _scan_stream(client, keys.dead(queue), needle)
            if hit is not None:
                entry_id, fields = hit
                message = _decoded(fields.get(b"m", b""))
                found = {**(_describe(message) if message else {}), "state": "dead", "dead_id": entry_id,
                         "reason": fields.get(b"reason", b"").decode(errors="replace"),
                         "deliveries": int(fields.get(b"deliveries", 0) or 0) or None}
                break
        stored = client.lindex(keys.result(message_id), 0)
    if stored is not None:
        found.setdefault("message_id", message_id)
        found.setdefault("deliveries", None)
        try:
            found["result"] = decode_result(message_id, stored)
            found["state"] = "done"  # also in the instant between storing it and the ack
        except ResultFailure as e:
            found["error"] = {"type": e.error_type, "message": e.error_message, "traceback": e.traceback}
            if found.get("state") != "dead":
                found["state"] = "failed"
    if not found:
        raise MessageNotFound(f"message {message_id} not found: not queued, running, delayed or dead, and "
                              "no stored result (it finished without store_results, or its records expired)")
    return found
