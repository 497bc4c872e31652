"""Running one unit of a job in a worker: the unit actor of a job kind.

A job kind declares its unit handler with :func:`tracebus.jobs.actor.unit_actor`; the
engine runs the actor with ``(job_id, unit)``. The runner asks the store for an attempt token (a settled or
cancelled unit is skipped), gives the handler a :class:`UnitContext` to stream rows into
fenced chunks and to leave a partial aggregate, commits both in one fenced step, settles
the unit and refills the job's in-flight window (or, within the user's share, another of
the user's jobs: :mod:`tracebus.jobs.share`). An exception leaves the unit running:
the retries middleware schedules it again, and when it gives up the jobs middleware
(:class:`tracebus.jobs.middleware.JobUnits`) fails the unit, so its section goes partial
and the job goes on. A whole job is never restarted.

The store and dispatcher of a worker process are bound once, after the fork, by the jobs
middleware (:func:`bind`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from tracebus.engine.worker import heartbeat
from tracebus.jobs.errors import JobError, StaleAttempt
from tracebus.jobs.results import ChunkWriter
from tracebus.jobs.share import Shares

log = logging.getLogger(__name__)
#: Per-unit lines (started, done, fenced off): a 1,250-unit job makes 2,500 of them, so the
#: text console shows them only at DEBUG (:data:`tracebus.logs.VERBOSE_LOGGERS`).
unit_log = logging.getLogger("tracebus.jobs.units")
#: Seconds between two progress summaries of one job, across every worker process.
SUMMARY_EVERY_S = 10
#: (job, monotonic time) this process last asked for a summary tick: it asks again only
#: :data:`SUMMARY_EVERY_S` later (another process may win meanwhile), not after every unit.
_tick_asked: tuple[str, float] = ("", 0.0)


class UnitContext:
    """What a unit handler gets: its job, unit, section and input, and where to write.

    Attributes:
        job_id(str), unit(int), attempt(int), section(str): the unit being run.
        input: the unit's item chunk, as the job kind submitted it.
        store: the :class:`~tracebus.jobs.store.JobStore` (artifacts, the job's status).
        plan(UnitPlan), chunk(int), app(dict): the job's unit plan, the unit's item chunk
            index, and the fields the kind stored at submit, as the runner read them (cached per
            process: they never change), so a handler need not read them again.
    """

    def __init__(self, store, job_id: str, unit: int, attempt: int, writer: ChunkWriter, unit_input):
        self.store, self.job_id, self.unit, self.attempt = store, job_id, unit, attempt
        self.section = writer.section
        self.input = unit_input
        self._writer = writer
        self._partial = b""

    def write(self, columns, rows) -> None:
        """Append rows to the unit's result (stored in fenced chunks as they fill) and heartbeat.

        Raises:
            StaleAttempt: the job was cancelled or another attempt owns the unit.
        """
        self._writer.write(columns, rows)
        heartbeat()

    def set_column_types(self, types) -> None:
        """Name the type of each column the unit writes (``{column: type}``, the names of
        :data:`tracebus.jobs.typed.TYPES`): with every column named, each chunk also gets a
        columnar copy (:mod:`tracebus.jobs.columnar`) that the typed exports read. Set it
        before the first :meth:`write`."""
        self._writer.types = dict(types) if types else None

    def set_partial(self, packed: bytes) -> None:
        """Leave the unit's partial aggregate; it is committed with the chunks (fenced)."""
        self._partial = packed

    @property
    def rows(self) -> int:
        return self._writer.rows

    @property
    def plan(self):
        return self.store.plan(self.job_id)

    @property
    def chunk(self) -> int:
        return self.plan.chunk_of(self.unit)

    @property
    def app(self) -> dict:
        return self.store.app(self.job_id)


@dataclass
class _Bound:
    store: Any
    dispatcher: Any


_bound: _Bound | None = None
#: The attempt this process is running now: (job_id, unit, attempt), for the middleware.
current: tuple[str, int, int] | None = None
#: Names of the actors declared with :func:`tracebus.jobs.actor.unit_actor`.
UNIT_ACTORS: set[str] = set()


def running() -> tuple[Any, str, int, int] | None:
    """``(store, job_id, unit, attempt)`` of the unit this process runs now, or None."""
    attempt = current
    if attempt is None or _bound is None:
        return None
    return (_bound.store, *attempt)


def bind(store, dispatcher) -> None:
    """Give this worker process its job store and dispatcher (done by the jobs middleware)."""
    global _bound
    _bound = _Bound(store, dispatcher)


def run_unit(handler: Callable[[UnitContext], None], job_id: str, unit: int) -> None:
    """Run ``unit`` of ``job_id`` unless it is settled or cancelled, then refill the window.

    Raises:
        Exception: whatever the handler raised (the middleware retries or fails the unit).
    """
    global current
    if _bound is None:
        raise JobError("no job store in this process: the jobs middleware was not installed")
    store = _bound.store
    attempt = store.begin_unit(job_id, unit)
    if attempt is not None:
        writer = store.chunk_writer(job_id, unit, attempt)
        ctx = UnitContext(store, job_id, unit, attempt, writer, store.load_input(job_id, unit))
        unit_log.info("job %s unit %d (%s) started, attempt %d", job_id, unit, ctx.section, attempt)
        # Left set if the handler raises: the jobs middleware needs the attempt to fail the unit.
        current = (job_id, unit, attempt)
        try:
            handler(ctx)
            writer.commit(ctx._partial)
            settled = store.finish_unit(job_id, unit, attempt, writer.rows)
            unit_log.info("job %s unit %d (%s) done: %d rows", job_id, unit, ctx.section, writer.rows)
            summarize(store, job_id, settled.finished)
        except StaleAttempt:
            unit_log.info("job %s unit %d attempt %d fenced off (cancelled or superseded)", job_id, unit, attempt)
        current = None
    refill(job_id, unit)


def summarize(store, job_id: str, finished: bool) -> None:
    """One INFO line when the job ends, and a progress line at most every
    :data:`SUMMARY_EVERY_S` seconds while it runs (whichever worker wins the tick)."""
    global _tick_asked
    try:
        if not finished:
            now = time.monotonic()
            if _tick_asked[0] == job_id and now - _tick_asked[1] < SUMMARY_EVERY_S:
                return
            _tick_asked = (job_id, now)
            if not store.summary_tick(job_id, SUMMARY_EVERY_S):
                return
        doc = store.status(job_id)
    except Exception as e:  # a log line never fails the unit it describes
        log.debug("job %s: no progress summary: %s", job_id, e)
        return
    p = doc["progress"]
    if finished:
        log.info("job %s %s in %.1f s: %d/%d units done, %d failed, %d rows", job_id, doc["status"],
                 doc["elapsed_seconds"], p["units_done"], p["units_total"], p["units_failed"], p["rows"])
    else:
        log.info("job %s running: %d/%d units done, %d rows, %.0f s", job_id,
                 p["units_done"] + p["units_failed"], p["units_total"], p["rows"], doc["elapsed_seconds"])


def refill(job_id: str, unit: int) -> None:
    """Send the units that take the place of ``unit``: of its job (up to the per-job cap, since
    a gated job's window reopens all at once when its first stage ends) or of another job of
    the same user, within the user's share (:mod:`tracebus.jobs.share`)."""
    for job, units in Shares(_bound.store).open_units(job_id, by_unit=unit).items():
        _bound.dispatcher.send(job, units)


def fail_current(job_id: str, unit: int, error: BaseException) -> bool:
    """Fail the running attempt of ``unit`` (its retries are exhausted) and refill.

    Returns:
        bool: True when the unit was failed or already fenced off (the message is settled).
    """
    global current
    running = current
    if running is None or running[:2] != (job_id, unit):
        return False
    current = None
    try:
        _bound.store.fail_unit(job_id, unit, running[2], f"{type(error).__name__}: {error}")
        log.error("job %s unit %d failed: %s", job_id, unit, error)
    except StaleAttempt:
        pass
    refill(job_id, unit)
    return True
