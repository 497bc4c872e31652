"""The trace-unit actor: what a worker runs for one (domain, CID chunk) unit of a job.

A unit asks the job store for an attempt token, streams its rows from the source batch by
batch into fenced msgpack chunks (memory is bounded by one batch, never by the job),
commits, settles, and refills the job's in-flight window by sending the next unit.
Transient source errors are retried by the worker's retry middleware with backoff; on the
last try, or for a permanent error, the unit is marked failed and its domain goes partial.
The whole job is never restarted.

``tracebus worker tracebus.trace.tasks`` runs these units.
"""

from __future__ import annotations

import logging

from .. import heartbeat, logs
from ..actor import actor, get_broker
from ..boot import on_worker_boot
from ..config import Settings
from ..errors import SourceError, StaleAttempt
from ..worker import current_message
from .jobstore import JobStore
from .results import ChunkWriter
from .sources import EventSource, open_source

log = logging.getLogger(__name__)

#: Retries of one unit after a transient error (exponential backoff from 2 s to 60 s).
UNIT_MAX_RETRIES = 3


class Runtime:
    """What a worker process needs to run units, built once per process after fork."""

    def __init__(self, settings: Settings, source: EventSource):
        broker = get_broker()
        self.settings = settings
        self.broker = broker
        self.store = JobStore(broker.client, broker.keys, settings)
        self.source = source


_runtime: Runtime | None = None


@on_worker_boot
def open_runtime() -> None:
    """Build the runtime in the worker right after fork (the source connects on first use)."""
    global _runtime
    settings = get_broker().settings  # the supervisor's settings, CLI overrides included
    _runtime = Runtime(settings, open_source(settings))


def runtime() -> Runtime:
    if _runtime is None:
        open_runtime()
    return _runtime


@actor(actor_name="trace_unit", queue="trace-events", max_retries=UNIT_MAX_RETRIES,
       min_backoff_ms=2_000, max_backoff_ms=60_000, time_limit_ms=600_000)
def trace_unit(job_id: str, unit: int) -> None:
    """Run one unit of a trace job (the actor; see :func:`run_unit`)."""
    message = current_message()
    final_try = message is None or message.options.get("retries", 0) >= UNIT_MAX_RETRIES
    run_unit(runtime(), job_id, unit, final_try)


logs.describe_messages("trace_unit", lambda job_id, unit: {"job_id": job_id, "unit": unit})


def run_unit(rt: Runtime, job_id: str, unit: int, final_try: bool) -> None:
    """Run ``unit`` of ``job_id`` unless it is settled or cancelled, then refill the window.

    Raises:
        Exception: a transient failure before the final try (the worker retries it).
    """
    if rt.store.overdue(job_id) and rt.store.time_out(job_id):
        log.error("job %s failed: ran past %d s", job_id, rt.settings.job_timeout_s)
    attempt = rt.store.begin_unit(job_id, unit)
    if attempt is not None:
        _execute(rt, job_id, unit, attempt, final_try)
    send_units(rt.settings, job_id, rt.store.take_next_units(job_id, 1, by_unit=unit))


def _execute(rt: Runtime, job_id: str, unit: int, attempt: int, final_try: bool) -> None:
    settings = rt.settings
    domain = rt.store.plan(job_id).domain_of(unit)
    cids = rt.store.load_cids(job_id, unit)
    writer = ChunkWriter(rt.broker.client, rt.broker.keys, job_id, domain, unit, attempt,
                         settings.job_ttl_s, max_rows=settings.stream_batch_rows)
    log.info("job %s unit %d (%s, %d cids) started, attempt %d", job_id, unit, domain, len(cids), attempt,
             extra={"job_id": job_id, "unit": unit})
    try:
        for columns, rows in rt.source.fetch(domain, cids, settings.fetchmany_rows):
            writer.write(columns, rows)
            heartbeat()
        writer.commit()
        rt.store.finish_unit(job_id, unit, attempt, writer.rows)
        log.info("job %s unit %d (%s, %d cids) done: %d rows", job_id, unit, domain, len(cids), writer.rows)
    except StaleAttempt:
        log.info("job %s unit %d attempt %d fenced off (cancelled or superseded)", job_id, unit, attempt)
    except Exception as e:
        transient = not isinstance(e, SourceError) or e.transient
        if transient and not final_try:
            raise
        log.error("job %s unit %d (%s) failed: %s", job_id, unit, domain, e)
        try:
            rt.store.fail_unit(job_id, unit, attempt, f"{type(e).__name__}: {e}")
        except StaleAttempt:
            pass


def send_units(settings: Settings, job_id: str, units: list[int], broker=None) -> None:
    """Enqueue ``units`` of ``job_id`` on the trace queue in one round trip.

    Args:
        broker: the broker to send through; None: this process's (:func:`get_broker`).
    """
    if units:
        messages = [trace_unit.message((job_id, u)).copy(queue_name=settings.queue) for u in units]
        (broker or get_broker()).enqueue_many(messages)
