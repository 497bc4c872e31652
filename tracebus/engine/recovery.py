"""Crash recovery of pending stream entries: reclaim, lease renewal and the janitor.

* :func:`reclaim_consumer` -- the supervisor reaped a child: hand its pending entries
  back to the queue at once (or dead-letter those past their delivery limit, naming the
  signal that killed it), then delete the consumer.
* :func:`renew_leases` / :class:`LeaseKeeper` -- a live worker resets the idle time of
  its entries (XCLAIM JUSTID with an owner check, in Lua) from its own process every
  quarter of the claim time, so the janitor never steals a healthy worker's 30-minute job
  and does take a dead or frozen one's within the claim time.
* :class:`Janitor` -- XAUTOCLAIM past ``claim_min_idle_ms`` covers a whole host dying,
  following the cursor across calls, over every declared queue; it also removes the
  consumers that are gone (nothing pending, idle for long) from the group.

Each reclaim that takes entries back (a dead child's, or a janitor pass that found idle
ones) counts once in the stats hash (``reclaims:<source>``); the scripts count the
entries themselves (``redelivered:<source>:<queue>``, ``dead_lettered:<queue>``).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Sequence


from tracebus import logs
from tracebus.engine.broker import Broker
from tracebus.engine.errors import BrokerError

log = logging.getLogger(__name__)


def reclaim_consumer(broker: Broker, queues: Sequence[str], consumer: str, reason: str) -> tuple[int, int]:
    """Requeue everything ``consumer`` held, then remove it from the group.

    Returns:
        (requeued, dead_lettered) summed over ``queues``.
    """
    requeued = dead = 0
    held: list[dict] = []
    for queue in queues:
        held += _held_messages(broker, queue, consumer)
        r, d, deleted = broker.requeue_pending(queue, consumer, reason)
        requeued, dead = requeued + r, dead + d + deleted
        broker.delete_consumer(queue, consumer)
    if requeued or dead:
        count_reclaim(broker, "supervisor")
        # The oldest entry held is the one the worker was running (it runs a batch in order).
        log.warning("reclaimed consumer=%s requeued=%d dead_lettered=%d reason=%s",
                    consumer, requeued, dead, reason, extra={**(held[0] if held else {}), "held": len(held)})
    return requeued, dead


def count_reclaim(broker: Broker, source: str) -> None:
    """Count one reclaim (a dead worker's or an idle host's entries taken back) in the stats hash.

    The entries themselves are counted by the Lua scripts, as redeliveries or dead letters.
    """
    broker.count(f"reclaims:{source}")


def _held_messages(broker: Broker, queue: str, consumer: str) -> list[dict]:
    """Log fields of the first entries ``consumer`` holds (only to name them in the log)."""
    try:
        return [logs.message_fields(m) for m in broker.held_entries(queue, consumer) if m is not None]
    except BrokerError:  # naming them is best effort; the requeue is not
        return []


def renew_leases(broker: Broker, queues: Sequence[str], consumer: str, count: int = 1000) -> int:
    """Reset the idle time of every entry ``consumer`` holds. Returns how many."""
    return sum(broker.renew(queue, consumer, count) for queue in queues)


class LeaseKeeper:
    """Renews one worker's leases from a thread of the worker process itself.

    The lease lives exactly as long as the process runs: a killed, stopped (SIGSTOP) or
    frozen worker stops renewing, so another host's janitor takes its entries after the
    claim time; a worker busy in a long query (the GIL released, or not) keeps renewing,
    so its job is never stolen. Failures are left to the worker's loop to report.

    Args:
        every_s(float): renewal period (a quarter of the claim time).
    """

    def __init__(self, broker: Broker, queues: Sequence[str], consumer: str, every_s: float):
        self.broker, self.queues, self.consumer, self.every_s = broker, list(queues), consumer, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracebus-lease", daemon=True)

    def start(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def _run(self) -> None:
        # Signals are the main thread's: a process-directed one (SIGALRM of a time limit,
        # SIGTERM) must never be delivered here, where an actor's signal mask does not apply.
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while not self._stop.wait(self.every_s):
            try:
                renew_leases(self.broker, self.queues, self.consumer)
            except BrokerError:  # Redis away: the loop logs it; renewal resumes with Redis
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class Janitor:
    """Periodic XAUTOCLAIM over every queue, resuming from the last cursor.

    Args:
        broker(Broker): the broker.
        consumer(str): the janitor's own consumer name (entries pass through it briefly).
    """

    def __init__(self, broker: Broker, consumer: str):
        self.broker = broker
        self.consumer = consumer
        self.cursors: dict[str, str] = {}

    def sweep(self, queues: Sequence[str], count: int = 100, max_rounds: int = 10) -> tuple[int, int, int]:
        """Claim and requeue idle entries. Returns (requeued, dead_lettered, deleted)."""
        totals = [0, 0, 0]
        for queue in queues:
            for _ in range(max_rounds):
                answer = self.broker.autoclaim(queue, self.consumer, self.cursors.get(queue, "0-0"), count)
                if answer is None:  # the stream is gone
                    break
                nxt, requeued, dead, deleted = answer
                self.cursors[queue] = nxt
                totals = [totals[0] + requeued, totals[1] + dead, totals[2] + deleted]
                if nxt == "0-0":
                    break
        if any(totals):
            log.warning("janitor requeued=%d dead_lettered=%d deleted=%d", *totals)
            count_reclaim(self.broker, "janitor")
        return tuple(totals)
