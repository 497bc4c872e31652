"""The trace-unit handler: what a worker runs for one (domain, CID chunk) unit of a trace job.

The job layer's runner (:mod:`tracebus.jobs.runner`) gives it the unit's domain (its
section) and CID chunk (its input); it streams that domain's rows from the event source
batch by batch into the unit's fenced chunks, so memory is bounded by one batch, never by
the job. Transient source errors are retried with backoff by the retries middleware; a
permanent one (``SourceError.retryable`` false) fails the unit at once, through the jobs
middleware, and its domain goes partial.

``tracebus worker tracebus.trace.tasks`` runs these units, those of MSD jobs (``msd_unit``),
and the seed-resolve and lineage stage units too (:mod:`tracebus.trace.stages.units`, imported
here so that one module list keeps working).
"""

from __future__ import annotations

import logging

from tracebus.engine.actor import get_broker
from tracebus.engine.boot import on_worker_boot
from tracebus.jobs.actor import unit_actor
from tracebus.jobs.runner import UnitContext
from tracebus.trace.events import jobs_domain
from tracebus.trace.msd.job import plan as msdplan
from tracebus.trace.msd.job import units as msdunits
from tracebus.trace.settings import TraceSettings
from tracebus.trace.sources import EventSource, open_source
from tracebus.trace import coltypes, query
from tracebus.trace.stages import units as stage_tasks  # noqa: F401  (registers the stage actor in every trace worker)

log = logging.getLogger(__name__)

#: Retries of one unit after a transient error (exponential backoff from 2 s to 60 s).
UNIT_MAX_RETRIES = 3
#: The actor name recorded in every trace job.
ACTOR_NAME = "trace_unit"


class Runtime:
    """What a worker process needs to run trace units, built once per process after fork."""

    def __init__(self, settings: TraceSettings, source: EventSource):
        self.settings = settings
        self.source = source


_runtime: Runtime | None = None


@on_worker_boot
def open_runtime() -> None:
    """Build the runtime in the worker right after fork (the source connects on first use)."""
    global _runtime
    settings = TraceSettings.adopt(get_broker().settings)  # the supervisor's, CLI overrides included
    _runtime = Runtime(settings, open_source(settings))


def unit_queue(settings) -> str:
    """The trace queue: ``TRACE_WORKER_QUEUE``, the one source of its name."""
    return TraceSettings.adopt(settings).queue


def fetch_unit(rt: Runtime, ctx: UnitContext) -> None:
    """Fetch one domain's rows for one CID chunk into the unit's result (typed by
    :mod:`tracebus.trace.coltypes`, so each chunk gets its columnar copy; the jobs domain's
    from one read of DW_MES_JOB per job, :mod:`tracebus.trace.events.jobs_domain`)."""
    ctx.set_column_types(coltypes.types_of(ctx.section))
    if ctx.section == jobs_domain.DOMAIN:
        jobs_domain.run(rt, ctx)
        return
    for columns, rows in rt.source.fetch(ctx.section, ctx.input, rt.settings.fetchmany_rows):
        ctx.write(columns, rows)


@unit_actor(ACTOR_NAME, queue=unit_queue, max_retries=UNIT_MAX_RETRIES, min_backoff_ms=2_000,
            max_backoff_ms=60_000, time_limit_ms=600_000)
def trace_unit(ctx: UnitContext) -> None:
    """The actor: :func:`fetch_unit` with this process's runtime."""
    fetch_unit(_runtime, ctx)


@unit_actor(msdplan.ACTOR_NAME, queue=unit_queue, max_retries=UNIT_MAX_RETRIES, min_backoff_ms=2_000,
            max_backoff_ms=60_000, time_limit_ms=600_000)
def msd_unit(ctx: UnitContext) -> None:
    """The MSD actor: one unit of an MSD events job (:mod:`tracebus.trace.msd.job.units`)."""
    msdunits.run_unit(_runtime, ctx)


@unit_actor(query.ACTOR_NAME, queue=unit_queue, max_retries=UNIT_MAX_RETRIES, min_backoff_ms=2_000,
            max_backoff_ms=60_000, time_limit_ms=600_000)
def query_unit(ctx: UnitContext) -> None:
    """A declared query kind's unit (:mod:`tracebus.trace.query`): its window and ID list."""
    app = ctx.store.status(ctx.job_id)["app"]
    kind = query.kind_of(app["query"])
    [item] = ctx.input  # one [window start, window end, ID list index] per unit
    columns = kind.statement(app["params"])[1]
    ctx.set_column_types(dict(columns.columns))
    for rows in query.unit_rows(_runtime.source, kind, app["params"], item, _runtime.settings.fetchmany_rows):
        ctx.write(columns.names, rows)
