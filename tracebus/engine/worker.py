"""One worker process: read from the streams, run actors, ack.

The loop reads a batch with XREADGROUP (its size adapts: it grows while messages are
quick and falls back to one as soon as they are slow, so a long unit is never stuck
behind another in a local buffer), runs each message through the middleware, and acks
the batch in one MULTI. A failure is offered to the middleware (the retries middleware
schedules a delayed copy) and dead-lettered when none of them settles it.
It skips paused queues (re-reading the paused set twice a second while idle and after every
read that brought messages, and checking it between the messages of a batch). It heartbeats through its :class:`WorkerSlot`, checks between messages whether it
should be recycled (message count or RSS), and on SIGTERM finishes the running message,
hands back the ones it has not started, acks and exits 0. Running and settling one message
is :mod:`tracebus.engine.processing`'s.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import defaultdict
from typing import Sequence

from tracebus.engine.broker import Broker
from tracebus.engine.errors import BrokerConnectionError, BrokerError, RedisFull
from tracebus.engine.memory import current_rss_bytes
from tracebus.engine.message import Delivery, now_ms
from tracebus.engine.identity import consumer_name
from tracebus.engine.middleware import Middleware, build_stack
from tracebus.engine.queue_control import PAUSE_CHECK_S
from tracebus.engine.outage import Outage
from tracebus.engine.processing import Processing
from tracebus.engine.recovery import LeaseKeeper
from tracebus.engine.registry import WorkerRegistry
from tracebus.engine.slot import WorkerSlot

log = logging.getLogger(__name__)

#: Exit codes of a worker process (the supervisor's protocol).
EXIT_OK = 0            # drained after SIGTERM
EXIT_BOOT_ERROR = 3    # could not start: the supervisor halts instead of respawning
EXIT_RECYCLE_JOBS = 4  # did --max-jobs messages
EXIT_RECYCLE_RSS = 5   # RSS passed --max-rss-mb
EXIT_ORPHANED = 6      # the supervisor is gone

_RSS_CHECK_S = 0.25
#: Wait before reading again after a full Redis refused a write (it frees memory by itself rarely).
FULL_RETRY_S = 1.0
_REGISTRY_EVERY_S = 1.0
#: A batch that ran longer than this is "slow": read one entry at a time from then on.
_SLOW_BATCH_S = 0.05


_active: "Worker | None" = None


def heartbeat() -> None:
    """Tell the supervisor this worker is alive; long actors call it per chunk or batch.

    It also refreshes the worker's registry entry (at most once a second), so a long
    message shows as running: the loop, which otherwise publishes it, does not turn
    while the actor runs. With Redis moving or away it raises
    :class:`BrokerConnectionError`: the message is run again once Redis is back.
    """
    if _active is not None:
        _active.slot.notify()
        try:
            _active._maybe_register()
        except BrokerConnectionError:
            raise  # Redis moved: the unit's writes may straddle two primaries, so it is redone
        except BrokerError as e:  # the registry is informational; never fail the actor for it
            log.debug("worker registry not refreshed: %s", e)


def current_message():
    """The message this worker process is running now (None outside a message)."""
    return _active.current if _active is not None else None


class Worker(Processing):
    """Runs messages from ``queues`` until told to stop or recycled.

    Args:
        broker(Broker): a broker whose client was created in this process.
        queues: queue names to read.
        slot(WorkerSlot): shared with the supervisor.
        max_jobs(int): recycle after this many messages (0: never).
        max_rss_bytes(int): recycle when RSS passes this between messages (0: never).
        middleware: the hooks run around every message, in order; None: the stack of
            :func:`tracebus.engine.middleware.build_stack` (declared plus defaults).
        consumer(str): this worker's consumer name (default: a new one for this process).
        parent_pid(int): the supervisor's pid, taken before the fork (default: the parent
            now; a supervisor that died while this child booted would already be pid 1).
    """

    def __init__(self, broker: Broker, queues: Sequence[str], slot: WorkerSlot, max_jobs: int = 0,
                 max_rss_bytes: int = 0, middleware: Sequence[Middleware] | None = None,
                 consumer: str | None = None, parent_pid: int | None = None):
        self.broker = broker
        self.queues = list(queues)
        self.slot = slot
        self.max_jobs = max_jobs
        self.max_rss_bytes = max_rss_bytes
        self.middleware = build_stack() if middleware is None else list(middleware)
        # Only the middleware that override after_success are called per message (hot path).
        self._on_success = [m for m in reversed(self.middleware)
                            if type(m).after_success is not Middleware.after_success]
        self.consumer = consumer or consumer_name()
        self.registry = WorkerRegistry(broker)
        self.alive = True
        self.done = 0
        self.started_ms = now_ms()
        self.current = None
        self.failure_reason = ""
        self._ppid = parent_pid or os.getppid()
        self._acks: dict[str, list[str]] = defaultdict(list)
        self._last_rss_check = 0.0
        self._last_register = 0.0
        self._prefetch = 1
        self.slow_batch_s = _SLOW_BATCH_S
        self._full = False  # Redis refused our last write for lack of memory (logged once)
        self._paused: set[str] = set()
        self._paused_at = float("-inf")
        self._running: Delivery | None = None
        self.outage = Outage(f"worker {self.consumer}", log)

    # -- signals ---------------------------------------------------------------------------------
    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGQUIT, self._on_quit)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the supervisor, which decides
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.siginterrupt(signal.SIGTERM, False)

    def _on_term(self, signum, frame):
        self.alive = False

    def _on_quit(self, signum, frame):
        # Quick stop: no ack. The supervisor reclaims whatever this consumer held.
        os._exit(1)

    def boot(self) -> None:
        """Run every middleware's ``after_worker_boot`` (once, before the first message)."""
        for m in self.middleware:
            m.after_worker_boot(self)

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> int:
        """Run until drained (0), recycled (4, 5) or orphaned (6)."""
        global _active
        _active = self
        leases = LeaseKeeper(self.broker, self.queues, self.consumer,
                             self.broker.settings.claim_min_idle_ms / 4000).start()
        try:
            return self._loop()
        finally:
            leases.stop()

    def _loop(self) -> int:
        while self.alive:
            self.slot.notify()
            if os.getppid() != self._ppid:
                return EXIT_ORPHANED
            try:
                if self.outage.down:
                    self._recover()
                self._maybe_register()
                queues = self._unpaused_queues()
                if not queues:  # every queue paused: idle, heartbeating, until one resumes
                    time.sleep(min(self.broker.settings.block_ms / 1000, PAUSE_CHECK_S))
                    continue
                deliveries = self.broker.fetch(queues, self.consumer, self._prefetch,
                                               self.broker.settings.block_ms)
                self._run_batch(deliveries)
            except BrokerConnectionError as e:
                self._sleep(self.outage.failed(e))
                continue
            except RedisFull as e:
                # Not a crash: a respawned worker would meet the same full Redis (a crash loop).
                self._note_full(e)
                self._sleep(FULL_RETRY_S)
                continue
            recycle = self._recycle_code()
            if recycle is not None:
                return recycle
        return EXIT_OK

    def _sleep(self, seconds: float) -> None:
        """Wait while Redis is away, heartbeating, and stopping early on SIGTERM."""
        until = time.monotonic() + seconds
        while self.alive and time.monotonic() < until:
            self.slot.notify()
            time.sleep(min(0.1, max(until - time.monotonic(), 0)))

    def _recover(self) -> None:
        """Redis answers again: settle what this worker did during the outage, then hand back
        its own pending entries at once rather than after the claim time.

        Acks that failed are sent again (the actor ran). The entry that was running when
        Redis went away is requeued as a delivery; entries read but never started (a batch
        cut short, or an XREADGROUP whose reply was lost with the connection) go back
        uncounted.
        """
        self.flush_acks()
        running, self._running = self._running, None
        total = 0
        for queue in self.queues:
            if running is not None and running.queue_name == queue:
                total += sum(self.broker.requeue_pending(queue, self.consumer, "Redis went away while it ran",
                                                         only=[running.entry_id]))
            total += sum(self.broker.requeue_pending(queue, self.consumer, "lost with the connection",
                                                     uncount=True))
        self.outage.recovered()
        if total:
            log.warning("worker %s: requeued %d entries it held when Redis went away", self.consumer, total)

    def _run_batch(self, deliveries: list[Delivery]) -> None:
        started = time.monotonic()
        if deliveries:
            # Read now, after the fetch: a message sent right after a pause (which the read
            # blocked before it returned) is held, not run on a view up to PAUSE_CHECK_S old.
            self._paused_at = float("-inf")
        for i, delivery in enumerate(deliveries):
            if (not self.alive or (self.max_jobs and self.done >= self.max_jobs)
                    or delivery.queue_name not in self._unpaused_queues()):
                self._give_back(deliveries[i:])
                break
            self.process(delivery)
            self.slot.notify()
        self.flush_acks()
        slow = time.monotonic() - started > self.slow_batch_s
        if slow:
            self._prefetch = 1
        elif len(deliveries) >= self._prefetch:  # COUNT is per stream: several queues give more
            self._prefetch = min(self._prefetch * 2, self.broker.settings.prefetch)

    def _give_back(self, deliveries: Sequence[Delivery]) -> None:
        by_queue: dict[str, list[str]] = defaultdict(list)
        for d in deliveries:
            by_queue[d.queue_name].append(d.entry_id)
        for queue, ids in by_queue.items():
            self.broker.give_back(queue, self.consumer, ids)

    def _unpaused_queues(self) -> list[str]:
        """The queues to read, without the paused ones (``P:paused``, re-read every 0.5 s and
        once after each fetch that brought messages)."""
        now = time.monotonic()
        if now - self._paused_at >= PAUSE_CHECK_S:
            self._paused_at = now
            self._paused = self.broker.paused_queues()
        return [q for q in self.queues if q not in self._paused] if self._paused else self.queues

    def flush_acks(self) -> None:
        for queue in list(self._acks):
            if self._acks[queue]:
                self.broker.ack(queue, self._acks[queue])
            del self._acks[queue]
        self.slot.set_done(self.done)

    # -- housekeeping ----------------------------------------------------------------------------
    def _maybe_register(self) -> None:
        now = time.monotonic()
        if now - self._last_register >= _REGISTRY_EVERY_S:
            self._last_register = now
            try:
                self.registry.publish(self)
            except RedisFull as e:  # the registry is informational: run messages regardless
                self._note_full(e)
                return
            if self._full:
                self._full = False
                log.warning("worker %s: Redis accepts writes again", self.consumer)

    def _note_full(self, error: RedisFull) -> None:
        """Log the first refusal of a full Redis, not every one."""
        if not self._full:
            self._full = True
            log.error("worker %s: %s; running on, units that must store rows fail their jobs",
                      self.consumer, error)

    def _recycle_code(self) -> int | None:
        if self.max_jobs and self.done >= self.max_jobs:
            log.info("worker %s recycling after %d messages", self.consumer, self.done)
            return EXIT_RECYCLE_JOBS
        now = time.monotonic()
        if self.max_rss_bytes and now - self._last_rss_check >= _RSS_CHECK_S:
            self._last_rss_check = now
            rss = current_rss_bytes()
            if rss > self.max_rss_bytes:
                log.warning("worker %s recycling: RSS %d MB > %d MB", self.consumer,
                            rss >> 20, self.max_rss_bytes >> 20)
                return EXIT_RECYCLE_RSS
        return None

    def close(self) -> None:
        """Ack what is done and leave the registry; with Redis away, say so in one line (the
        supervisor requeues what this consumer still holds when it reaps it)."""
        try:
            self.flush_acks()
            self.registry.remove(self.consumer)
        except BrokerError as e:
            log.warning("worker %s: stopped without settling with Redis: %s", self.consumer, e)
