"""The supervisor: forks a pool of workers and keeps it healthy (gunicorn's arbiter shape).

Signal handlers only record the signal; the main loop drains the record, then reaps,
murders and manages children and does the queue's housekeeping:

* reap: ``waitpid(-1, WNOHANG)``; a dead child's pending entries are requeued at once
  (or dead-lettered with the signal that killed it, past their delivery limit);
* murder: a child whose heartbeat is older than ``heartbeat_timeout_s`` gets SIGABRT, then
  SIGKILL on the next pass; one past its message's hard deadline gets SIGKILL;
* manage: spawn up to N (with a backoff after crashes; a boot failure halts), retire extras;
* housekeeping: promote due delayed messages, run the XAUTOCLAIM janitor over every
  declared queue, remove gone consumers from the group, refresh the worker registry (the
  workers renew their own leases), send the ticks of periodic actors, and give the
  middleware's ``supervisor_tick`` hooks a turn (the job layer's sweeper of stranded jobs);
  these Redis-side steps are :mod:`tracebus.engine.housekeeping`'s.

SIGTERM/SIGINT drain gracefully (children finish their message) up to
``graceful_timeout_s``; a second one, or SIGQUIT, stops at once. SIGHUP rolls the
workers; SIGTTIN/SIGTTOU add or remove one.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

from tracebus.engine import recovery, worker as worker_mod
from tracebus.engine.broker import Broker
from tracebus.engine.connection import redact
from tracebus.engine.identity import consumer_name, new_boot_id
from tracebus.engine.middleware import Middleware, build_stack
from tracebus.engine.settings import Settings
from tracebus.engine.errors import BrokerConnectionError, RedisFull
from tracebus.engine.housekeeping import Housekeeping
from tracebus.engine.outage import Outage
from tracebus.engine.redis_check import check_redis_config
from tracebus.engine.registry import WorkerRegistry
from tracebus.engine.scheduler import Scheduler
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.spawn import HANDLED, HANDLED_SIGNALS, run_child
from tracebus.engine.systemd import sd_notify

log = logging.getLogger(__name__)

_TICK_S = 0.1
_RECYCLE_CODES = {worker_mod.EXIT_RECYCLE_JOBS: "recycled after max jobs",
                  worker_mod.EXIT_RECYCLE_RSS: "recycled for RSS"}


@dataclass
class Child:
    pid: int
    consumer: str
    slot: WorkerSlot
    spawned: float = field(default_factory=time.monotonic)
    retiring: bool = False
    aborted: bool = False
    kill_reason: str = ""


def describe_exit(status: int) -> str:
    """A human reason for a wait status (used as the dead-letter reason)."""
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        return f"killed by {sig}" + (" (out of memory?)" if sig == "SIGKILL" else "")
    code = os.WEXITSTATUS(status)
    return _RECYCLE_CODES.get(code, f"exited with code {code}")


class Supervisor(Housekeeping):
    """Forks and tends ``processes`` workers reading ``queues``.

    Args:
        settings(Settings): redis, timeouts, limits.
        queues: queue names the workers read.
        processes(int): pool size.
        max_jobs(int): recycle a child after this many messages plus jitter (0: never).
        max_rss_mb(int): recycle a child whose RSS passes this (0: never).
        middleware: ``module:Class`` specs every worker adds to its middleware stack.
        schedules: periodic messages this supervisor sends (:mod:`tracebus.engine.scheduler`).
        redis_url_now: where the project's Redis is now (its ``redis.url`` file); while Redis
            is away, another URL there is said in one line and, with ``follow_moves`` (the URL
            came from that file), drains the pool and ends :meth:`run` with :attr:`moved_to` set.
        follow_moves(bool): follow :attr:`redis_url_now` (else only say where Redis went).
    """

    def __init__(self, settings: Settings, queues, processes: int, max_jobs: int = 0, max_rss_mb: int = 0,
                 middleware=(), schedules=(), redis_url_now: Callable[[], str] | None = None,
                 follow_moves: bool = True):
        self.settings = settings
        self.redis_url_now = redis_url_now
        self.follow_moves = follow_moves
        self._moves_said: set[str] = set()
        #: Where Redis went (set when :attr:`redis_url_now` named another URL): run() returned
        #: so that the caller starts the pool again there.
        self.moved_to: str | None = None
        self.queues = list(queues)
        self.processes = processes
        self.max_jobs = max_jobs
        self.max_rss_bytes = max_rss_mb << 20
        self.middleware = list(middleware)
        self.children: dict[int, Child] = {}
        self.signals: queue.SimpleQueue = queue.SimpleQueue()
        self.stopping_at: float | None = None
        self.halt_reason: str | None = None
        self.exit_code = 0
        self.crashes = 0
        self.next_spawn_at = 0.0
        self.unreclaimed: list[tuple[str, str]] = []
        self.timers: dict[str, float] = {}
        self.broker: Broker | None = None
        self.schedules = list(schedules)
        self.scheduler: Scheduler | None = None
        self.outage = Outage("supervisor", log)

    # -- setup -------------------------------------------------------------------------------
    def _install_signals(self) -> None:
        for name in HANDLED:
            signal.signal(getattr(signal, f"SIG{name}"), lambda signum, frame: self.signals.put(signum))

    def _boot(self) -> None:
        self.broker = Broker(self.settings)
        self.broker.check_server()
        for warning in check_redis_config(self.broker.client, self.settings.redis_url):
            log.warning("%s", warning)
        for q in self.queues:
            try:
                self.broker.declare_queue(q)
            except RedisFull as e:  # a restart while Redis is full: the queues exist, run on
                log.error("cannot declare queue %s: %s", q, e)
        self.registry = WorkerRegistry(self.broker)
        self.janitor = recovery.Janitor(self.broker, consumer_name(tag=f"janitor-{new_boot_id()}"))
        # The supervisor's own instances (its children build theirs after the fork).
        self.tick_hooks = [m for m in build_stack(self.middleware)
                           if type(m).supervisor_tick is not Middleware.supervisor_tick]
        if self.schedules:
            self.scheduler = Scheduler(self.broker, self.schedules)

    def _boot_when_redis_answers(self) -> bool:
        """Boot, waiting (with backoff, one log line) while Redis is away. False when a
        signal asked to stop meanwhile."""
        while True:
            try:
                self._boot()
                self.outage.recovered()
                return True
            except BrokerConnectionError as e:
                wait = self.outage.failed(e)
            if self._redis_moved():
                return False
            try:
                signum = self.signals.get(timeout=min(wait, 1.0) if self.redis_url_now else wait)
            except queue.Empty:
                continue
            if signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
                log.info("supervisor stopped before Redis answered")
                return False

    def run(self) -> int:
        """Run until stopped. Returns the process exit code."""
        self._install_signals()
        if not self._boot_when_redis_answers():
            return 0
        self.manage()
        sd_notify(self.settings.notify_socket, b"READY=1")
        log.info("supervisor %d started %d workers on %s", os.getpid(), self.processes, ",".join(self.queues))
        while True:
            self._handle_signals()
            self.reap()
            if self.halt_reason or (self.stopping_at is not None and not self.children):
                break
            if self.stopping_at is not None:
                if time.monotonic() > self.stopping_at:
                    self._kill_all(signal.SIGKILL, "graceful timeout passed")
                # Draining children are still running messages: keep renewing their leases,
                # or another host's janitor steals them once they idle past the claim time.
                self.housekeeping()
                continue
            self.murder()
            self.manage()
            self.housekeeping()
            if self.outage.down and self.moved_to is None and self._due("moved", 1.0) and self._redis_moved():
                self.handle_term()
        self._shutdown()
        return self.exit_code

    def _redis_moved(self) -> bool:
        """True when :attr:`redis_url_now` names another Redis than the one in use (``tracebus up``
        started again on another port): says so in one line and records it in :attr:`moved_to`."""
        url = self.redis_url_now() if self.redis_url_now is not None else ""
        if not url or url == self.settings.redis_url:
            return False
        if not self.follow_moves:  # REDIS_URL was given: said once, the operator decides
            if url not in self._moves_said:
                self._moves_said.add(url)
                log.warning("Redis moved? %s is away, and the project's redis.url names %s: restart this "
                            "pool with that REDIS_URL (or without REDIS_URL, to follow redis.url)",
                            redact(self.settings.redis_url), redact(url))
            return False
        log.warning("Redis moved: %s now, not %s; the workers follow it", redact(url),
                    redact(self.settings.redis_url))
        self.moved_to = url
        return True

    def _handle_signals(self) -> None:
        try:
            signums = [self.signals.get(timeout=_TICK_S)]
            while not self.signals.empty():
                signums.append(self.signals.get_nowait())
        except queue.Empty:
            return
        for signum in signums:
            getattr(self, f"handle_{signal.Signals(signum).name[3:].lower()}")()

    # -- signal handlers (called from the loop, not from signal context) ----------------------
    def handle_term(self) -> None:
        if self.stopping_at is not None:
            return self.handle_quit()
        log.info("supervisor draining: SIGTERM to %d workers", len(self.children))
        self.stopping_at = time.monotonic() + self.settings.graceful_timeout_s
        self._kill_all(signal.SIGTERM)

    handle_int = handle_term

    def handle_quit(self) -> None:
        log.info("supervisor stopping now")
        self._kill_all(signal.SIGQUIT)
        self.stopping_at = min(self.stopping_at or float("inf"), time.monotonic() + 2.0)

    def handle_hup(self) -> None:
        log.info("supervisor rolling %d workers", len(self.children))
        for child in self.children.values():
            child.retiring = True

    def handle_ttin(self) -> None:
        self.processes += 1

    def handle_ttou(self) -> None:
        self.processes = max(1, self.processes - 1)

    def handle_chld(self) -> None:
        pass  # reaping happens in the loop

    # -- reap / murder / manage -----------------------------------------------------------------
    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            child.slot.close()
            reason = child.kill_reason or describe_exit(status)
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            level = logging.INFO if code in (0, *_RECYCLE_CODES) else logging.ERROR
            log.log(level, "worker %d (%s) %s", pid, child.consumer, reason,
                    extra={"worker_pid": pid, "consumer": child.consumer})
            self.unreclaimed.append((child.consumer, reason))
            if code == worker_mod.EXIT_BOOT_ERROR:
                self.halt_reason = f"worker {pid} failed to boot"
                self.exit_code = worker_mod.EXIT_BOOT_ERROR
            elif code not in (0, *_RECYCLE_CODES) and not child.retiring and self.stopping_at is None:
                self._note_crash(child)

    def _note_crash(self, child: Child) -> None:
        # Crash loops back off; a child that lived a while resets the count.
        self.crashes = self.crashes + 1 if time.monotonic() - child.spawned < 10 else 1
        delay = min(0.05 * 2 ** (self.crashes - 1), 10.0) if self.crashes > 1 else 0.0
        self.next_spawn_at = time.monotonic() + delay

    def murder(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            deadline = child.slot.deadline
            if deadline and now > deadline:
                child.kill_reason = "killed by SIGKILL: past its message's hard time limit"
                self._signal(child, signal.SIGKILL)
            elif now - child.slot.last_heartbeat > self.settings.heartbeat_timeout_s:
                child.kill_reason = "killed: no heartbeat for %ds" % self.settings.heartbeat_timeout_s
                self._signal(child, signal.SIGKILL if child.aborted else signal.SIGABRT)
                child.aborted = True

    def manage(self) -> None:
        active = [c for c in self.children.values() if not c.retiring]
        if len(active) > self.processes:  # retire the oldest first
            for child in sorted(active, key=lambda c: c.spawned)[: len(active) - self.processes]:
                child.retiring = True
        for child in self.children.values():
            if child.retiring and not child.kill_reason:
                child.kill_reason = "retired"
                self._signal(child, signal.SIGTERM)
        missing = self.processes - sum(1 for c in self.children.values() if not c.retiring)
        if missing > 0 and time.monotonic() >= self.next_spawn_at:
            for _ in range(missing):
                self.spawn()

    def spawn(self) -> None:
        slot = WorkerSlot()
        boot_id = new_boot_id()
        jitter = random.randint(0, max(self.max_jobs // 10, 1)) if self.max_jobs else 0
        parent = os.getpid()
        # Until the child has put its own handlers in place it runs the supervisor's, which only
        # queue a signal for the supervisor's loop: a SIGTERM (retire, drain) sent then would be
        # swallowed and the child would run on. Blocked across the fork, such a signal waits
        # until the child has reset its handlers (run_child unblocks them).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:  # child: never returns
                run_child(self.settings, self.queues, slot, boot_id, self.max_jobs + jitter, self.max_rss_bytes,
                          self.middleware, parent)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        consumer = consumer_name(pid, boot_id)
        self.children[pid] = Child(pid, consumer, slot)
        log.info("worker %d started", pid, extra={"worker_pid": pid, "consumer": consumer})

    # -- stopping -------------------------------------------------------------------------------
    def _signal(self, child: Child, signum: int) -> None:
        try:
            os.kill(child.pid, signum)
        except ProcessLookupError:
            pass

    def _kill_all(self, signum: int, reason: str = "") -> None:
        for child in self.children.values():
            if reason:
                child.kill_reason = reason
            self._signal(child, signum)

    def _shutdown(self) -> None:
        if self.children:
            self._kill_all(signal.SIGKILL, self.halt_reason or "supervisor stopped")
            deadline = time.monotonic() + 5
            while self.children and time.monotonic() < deadline:
                self.reap()
                time.sleep(0.05)
        try:
            self._reclaim()
        except BrokerConnectionError as e:
            log.warning("supervisor: Redis away at exit; what %d stopped workers held is left to "
                        "the janitor (%s)", len(self.unreclaimed), e)
        if self.halt_reason:
            log.error("supervisor halted: %s", self.halt_reason)
        sd_notify(self.settings.notify_socket, b"STOPPING=1")
