"""Operator controls of a queue (``tracebus queues pause|resume|purge``).

A mixin of :class:`tracebus.engine.broker.Broker`, like the dead-letter operations. A paused
queue is a member of the set ``P:paused``: workers re-read that set every
:data:`PAUSE_CHECK_S` while idle and after every read that brought messages, so a message
sent once ``pause`` returned is never run (the one running finishes; unstarted ones read
in the same batch are given back). Purging deletes the messages that
wait (never read) and the delayed ones; running messages finish and are acked as usual.
"""

from __future__ import annotations

import logging

from tracebus.engine.redis_errors import translate_errors

log = logging.getLogger(__name__)

#: How stale a worker's view of the paused queues may be, in seconds.
PAUSE_CHECK_S = 0.5


class QueueControl:
    """Pause, resume and purge; expects ``client``, ``keys`` and ``_queue_script``."""

    @translate_errors
    def pause(self, queue: str) -> bool:
        """Pause ``queue``. Returns False when it already was paused."""
        return bool(self.client.sadd(self.keys.paused(), queue))

    @translate_errors
    def resume(self, queue: str) -> bool:
        """Resume ``queue``. Returns False when it was not paused."""
        return bool(self.client.srem(self.keys.paused(), queue))

    @translate_errors
    def paused_queues(self) -> set[str]:
        return {q.decode() for q in self.client.smembers(self.keys.paused())}

    @translate_errors
    def purge(self, queue: str, batch: int = 1000) -> dict:
        """Delete the waiting and the delayed messages of ``queue``.

        Returns:
            dict: ``{"waiting": n, "delayed": n}`` messages deleted.
        """
        waiting = 0
        while True:
            deleted = int(self._queue_script("purge", queue, batch=batch))
            waiting += deleted
            if deleted == 0:
                break
        pipe = self.client.pipeline(transaction=True)
        pipe.zcard(self.keys.delayed(queue))
        pipe.delete(self.keys.delayed(queue))
        delayed = int(pipe.execute()[0])
        log.info("queue %s purged: %d waiting and %d delayed messages deleted", queue, waiting, delayed)
        return {"waiting": waiting, "delayed": delayed}
