"""The consumer group's pending entries: what a consumer holds, and handing it back.

A mixin of :class:`tracebus.engine.broker.Broker`, kept apart from the message path: the
operations crash recovery (:mod:`tracebus.engine.recovery`: reclaim a dead child's entries,
renew a live one's leases, the XAUTOCLAIM janitor, forgetting gone consumers) and a worker
handing back what it read but never started run on a queue's pending entries list (PEL).
Each is one engine script (``requeue``, ``renew``, ``autoclaim``, ``forget_consumers``), and a
stream deleted under us (:func:`stream_gone`) holds nothing pending.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import redis

from tracebus.engine.errors import DecodeError
from tracebus.engine.keys import GROUP
from tracebus.engine.message import Message
from tracebus.engine.redis_errors import translate_errors


class PendingEntries:
    """Requeue, renew, autoclaim and inspect pending entries; expects ``client``, ``keys``,
    ``settings`` and ``_queue_script``."""

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


def stream_gone(error: redis.ResponseError) -> bool:
    """True for the errors Redis gives when a stream or its group was deleted under us."""
    text = str(error)
    return text.startswith("NOGROUP") or text.startswith("UNBLOCKED")
