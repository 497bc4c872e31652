"""Control of the source's sessions from a worker: the cap, the name, the limit, the cancel.

A worker's runtime gives its source a :class:`SessionControl`; every statement the source
runs is then a :class:`Statement` (``with control.statement() as st``), which

* waits for one of the ``TRACEBUS_SOURCE_MAX_SESSIONS`` places shared by every worker of
  every host (:class:`tracebus.jobs.places.Places`), holding no session while it waits and
  giving up when the unit's job ends meanwhile;
* names the session for what it serves (:attr:`Statement.label`, ``tracebus <job> <unit>
  #<attempt> <user>``; the job, unit and user apart for Oracle's module/action/client_identifier),
  so that a later attempt of the unit can end a statement an earlier one left running (a
  frozen worker's: :attr:`Statement.unit_prefix`);
* runs a watcher thread while the statement is open: it heartbeats for the worker (a long
  statement returns nothing to the unit's code for minutes), renews the place's lease, and it
  cancels the statement on the server (the callback the source binds: ``Connection.cancel()``
  on PostgreSQL and Oracle, ``interrupt()`` on SQLite) within :data:`WATCH_EVERY_S` of the
  unit's job being cancelled, failed or past its time limit;
* cancels it at the unit's time limit (the soft limit armed by the time-limit middleware,
  ``setitimer``), whether or not the driver lets that signal interrupt it, and when the unit's
  own code is interrupted mid-statement: the source calls :meth:`Statement.abort`.

A statement cancelled for its job fails with a :class:`SourceError` that names why and is not
retried. Outside a unit (the API's synchronous answers) a statement has no place, no watcher
and the label ``tracebus``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from tracebus.engine.worker import heartbeat
from tracebus.jobs import runner
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.places import RENEW_EVERY_S, PlaceLost, Places
from tracebus.trace.errors import SourceError

log = logging.getLogger(__name__)

#: How often the watcher reads the unit's job: the delay from a cancel to the server's.
WATCH_EVERY_S = 0.25
#: A statement still running this long after its cancel has its connection cut (when the
#: source can: PostgreSQL), so the worker is never left waiting on a server that ignores it.
SEVER_AFTER_S = 5.0
#: The pool of places the source's sessions take.
POOL = "source"


def session_places(client, settings) -> Places:
    """The pool of the source's session places (``TRACEBUS_SOURCE_MAX_SESSIONS`` of them) on
    ``client``, under ``settings``' key prefix: what workers take and status pages read."""
    return Places(client, JobKeys(settings.key_prefix), POOL, settings.source_max_sessions)


class StatementCancelled(SourceError):
    """The statement was stopped on the server because its unit's job ended (not retried)."""


class Statement:
    """One statement of a source, as the control sees it.

    Attributes:
        job_id(str | None), unit(int | None), user(str): what it serves (None outside a unit).
        label(str): the session's name, ``tracebus <job> <unit> #<attempt> <user>`` (``tracebus``
            outside a unit).
        unit_prefix(str): the start of the name of every attempt's sessions of this unit.
        reason(str | None): why the watcher cancelled it, once it did.
    """

    def __init__(self, job_id: str | None = None, unit: int | None = None, user: str = "", attempt: int = 0):
        self.job_id, self.unit, self.user, self.attempt = job_id, unit, user, attempt
        self.unit_prefix = f"tracebus {job_id} {unit} " if job_id is not None else "tracebus "
        self.label = (f"{self.unit_prefix}#{attempt} {user}".rstrip() if job_id is not None else "tracebus")
        self.reason: str | None = None
        self.transient = False
        self.severed = False  # the reason is the server's silence: its connection was cut
        self._cancel: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self.peer: _Peer | None = None
        self.last_heard = time.monotonic()

    def watch_peer(self, probe: Callable[[float], None], sever: Callable[[], None], dead_peer_s: float) -> None:
        """Have the watcher tell a silent server from a busy one: after ``dead_peer_s / 2`` without
        a round trip coming back (:meth:`heard`), ``probe(timeout_s)`` opens a connection of its
        own and runs a trivial statement; when that fails within ``dead_peer_s / 2`` (a frozen
        server accepts TCP but never answers, which TCP keepalives cannot see) ``sever()`` cuts
        this statement's connection, so the driver fails at once and the unit is retried."""
        self.peer = _Peer(probe, sever, dead_peer_s)
        self.last_heard = time.monotonic()

    def heard(self) -> None:
        """A round trip of the statement came back (the source calls it after each fetch)."""
        self.last_heard = time.monotonic()

    def sever(self, reason: str) -> None:
        """Cut the statement's connection (its server does not answer): a transient failure."""
        with self._lock:
            if self.reason is None:
                self.reason, self.transient, self.severed = reason, True, True
        if self.peer is not None:
            self._run_cancel(self.peer.sever)

    def bind(self, cancel: Callable[[], None] | None) -> None:
        """Name the callback that stops this statement on the server (None: nothing to stop now).
        A cancel asked before the source bound one runs as soon as it is bound."""
        with self._lock:
            self._cancel = cancel
            pending = self.reason is not None and cancel is not None
        if pending:
            self._run_cancel(cancel)

    def cancel(self, reason: str, transient: bool = False) -> None:
        """Stop the statement on the server for ``reason`` (the first reason is kept)."""
        with self._lock:
            if self.reason is None:
                self.reason, self.transient = reason, transient
            cancel = self._cancel
        if cancel is not None:
            self._run_cancel(cancel)

    def abort(self) -> None:
        """The unit's code was interrupted mid-statement (its time limit, a signal): stop the
        statement on the server before the exception goes on."""
        with self._lock:
            cancel = self._cancel
        if cancel is not None:
            self._run_cancel(cancel)

    def _run_cancel(self, cancel: Callable[[], None]) -> None:
        try:
            cancel()
        except Exception as e:  # the server or its connection is gone: nothing runs there any more
            log.debug("statement of %s not cancelled: %s", self.label, e)

    def check(self) -> None:
        """Raise :class:`StatementCancelled` when the statement was cancelled for its job."""
        if self.reason is not None:
            raise self.error()

    def error(self, cause: BaseException | None = None) -> SourceError:
        """The error a source raises for a statement its driver reports as failed: one that names
        why it was cancelled when the watcher cancelled it (``cause`` otherwise, unchanged)."""
        if self.reason is None:
            return cause if isinstance(cause, SourceError) else SourceError(str(cause))
        what = "statement's connection cut" if self.severed else "statement cancelled on the server"
        return StatementCancelled(f"{what}: {self.reason}", transient=self.transient)


class _Peer:
    """The dead-peer watch of one statement (:meth:`Statement.watch_peer`)."""

    def __init__(self, probe: Callable[[float], None], sever: Callable[[], None], dead_peer_s: float):
        self.probe, self.sever, self.dead_peer_s = probe, sever, dead_peer_s
        self.checked = time.monotonic()  # when the server last answered a probe
        self.probing: threading.Thread | None = None

    def tick(self, st: Statement) -> None:
        """Start a probe when the statement has been silent for half the limit (one at a time,
        in a thread of its own: a probe may wait that long, the watcher may not)."""
        half = self.dead_peer_s / 2
        if self.probing is not None and self.probing.is_alive():
            return
        if time.monotonic() - max(st.last_heard, self.checked) < half:
            return

        def probe():
            try:
                self.probe(half)
                self.checked = time.monotonic()
            except Exception as e:
                log.warning("the source's server did not answer %s's probe: %s; cutting its connection",
                            st.label, e)
                st.sever(f"the source's server did not answer for {self.dead_peer_s:g} s "
                         f"(TRACEBUS_SOURCE_DEAD_PEER_S): {e}")

        self.probing = threading.Thread(target=probe, name=f"probe {st.label}", daemon=True)
        self.probing.start()


class SessionControl:
    """The session cap, naming and cancel of a worker's source.

    Args:
        places(Places | None): the pool of session places (None: no cap).
    """

    def __init__(self, places: Places | None):
        self.places = places

    @contextmanager
    def statement(self) -> Iterator[Statement]:
        """Wait for a place, then watch the statement until the block ends.

        Raises:
            StatementCancelled: the unit's job ended while it waited for a place.
        """
        running = runner.running()
        if running is None:
            yield Statement()
            return
        store, job_id, unit, attempt = running
        st = Statement(job_id, unit, _owner(store, job_id), attempt)
        holder = None
        if self.places is not None:
            holder = self.places.new_holder()

            def should_stop():
                reason = store.stop_reason(job_id)
                if reason:
                    raise StatementCancelled(f"statement not started: {reason}")

            self.places.take(holder, job_id, should_stop=_every(WATCH_EVERY_S, should_stop), on_wait=heartbeat)
        remaining_s = signal.getitimer(signal.ITIMER_REAL)[0]  # the unit's time limit, when armed
        watcher = _Watcher(st, store, self.places, holder,
                           time.monotonic() + remaining_s if remaining_s else None)
        watcher.start()
        try:
            yield st
        finally:
            watcher.stop()
            if holder is not None:
                try:
                    self.places.release(holder)
                except Exception as e:  # Redis away: the lease runs out by itself
                    log.warning("session place of %s not released: %s", st.label, e)


def _owner(store, job_id: str) -> str:
    try:
        return store.owner(job_id)
    except Exception:  # the job expired under the unit: it is fenced off at its next write
        return ""


def _every(seconds: float, check: Callable[[], None]) -> Callable[[], None]:
    """``check`` run at most once per ``seconds`` (a waiter polls faster than it needs to read the job)."""
    last = [0.0]

    def run():
        now = time.monotonic()
        if now - last[0] >= seconds:
            last[0] = now
            check()

    return run


class _Watcher(threading.Thread):
    """Renews the statement's place and cancels the statement when its job ends."""

    def __init__(self, st: Statement, store, places: Places | None, holder: str | None,
                 deadline: float | None):
        super().__init__(name=f"watch {st.label}", daemon=True)
        self.st, self.store, self.places, self.holder = st, store, places, holder
        self.deadline = deadline
        self._done = threading.Event()

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join()

    def _watch_running(self, now: float) -> float | None:
        """One tick's checks of a statement not yet cancelled: the dead-peer probe's, and the
        unit's time limit. Returns ``now`` when the statement was cancelled for its time limit."""
        if self.st.peer is not None:
            self.st.peer.tick(self.st)
        if self.deadline is not None and now > self.deadline:
            log.info("cancelling the statement of %s on the server: the unit ran past its time limit",
                     self.st.label)
            self.st.cancel("the unit ran past its time limit", transient=True)
            return now
        return None

    def run(self) -> None:
        ticks_per_renew = max(1, round(RENEW_EVERY_S / WATCH_EVERY_S))
        tick, cancelled_at, severed = 0, None, False
        # After a cancel the watcher goes on until the statement ends: it keeps the place (the
        # session is in use until then) and cuts the connection of a statement that outlives
        # its cancel by SEVER_AFTER_S.
        while not self._done.wait(WATCH_EVERY_S):
            tick += 1
            now = time.monotonic()
            if cancelled_at is None and self.st.reason is not None:
                cancelled_at = now  # cancelled or cut by the dead-peer probe
            if cancelled_at is None:
                cancelled_at = self._watch_running(now)
            elif not severed and self.st.peer is not None and now - cancelled_at > SEVER_AFTER_S:
                log.warning("the statement of %s still runs %.0f s after its cancel: cutting its connection",
                            self.st.label, SEVER_AFTER_S)
                self.st.sever(self.st.reason or "cancelled")
                severed = True
            try:
                # A statement the server works on for minutes returns nothing to the unit's
                # code: the watcher tells the supervisor the worker is alive (its hard time
                # limit still bounds the unit).
                heartbeat()
                if self.holder is not None and tick % ticks_per_renew == 0:
                    self.places.renew(self.holder, self.st.job_id)
                reason = self.store.stop_reason(self.st.job_id) if cancelled_at is None else None
            except PlaceLost as e:
                self.st.cancel(f"{e}; the unit runs again", transient=True)
                cancelled_at = cancelled_at or time.monotonic()
                self.holder = None  # nothing left to renew
                continue
            except Exception as e:  # Redis away: keep the statement; the next tick reads again
                log.debug("watch of %s: %s", self.st.label, e)
                continue
            if reason:
                log.info("cancelling the statement of %s on the server: %s", self.st.label, reason)
                self.st.cancel(reason)
                cancelled_at = time.monotonic()
