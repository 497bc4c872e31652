"""What a trace unit runs with: the job layer's unit context plus the worker's settings and source.

A worker process builds its :class:`Runtime` once, right after the fork (:func:`open_runtime`,
a boot hook: the source connects on first use, in the process that uses it), and gives its
source the control of its sessions (:mod:`tracebus.trace.sources.control`: the system-wide
session cap, the sessions' names, the cancel on the server). Each unit of any
kind is handed one :class:`TraceUnit`, so a kind's unit code gets everything it reads through
its context: the unit (job, section, input, chunk), what the runner already read of its job
(plan, ``app``), where to write, and the settings and source.
"""

from __future__ import annotations

from tracebus.engine.actor import get_broker
from tracebus.engine.boot import on_worker_boot
from tracebus.jobs.runner import UnitContext
from tracebus.trace.settings import TraceSettings
from tracebus.trace.sources import EventSource, open_source
from tracebus.trace.sources.control import SessionControl, session_places


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
    broker = get_broker()
    settings = TraceSettings.adopt(broker.settings)  # the supervisor's, CLI overrides included
    source = open_source(settings)
    source.control = SessionControl(session_places(broker.client, settings))
    _runtime = Runtime(settings, source)


def current() -> Runtime:
    """This process's runtime (built by :func:`open_runtime`)."""
    if _runtime is None:
        raise RuntimeError("no trace runtime in this process: open_runtime() was not run")
    return _runtime


class TraceUnit:
    """One unit of a trace job as its kind runs it.

    Attributes:
        job_id, unit, attempt, section, input, store, plan, chunk, app: as
            :class:`~tracebus.jobs.runner.UnitContext`'s.
        settings(TraceSettings), source(EventSource): the worker's.
        unit_context(UnitContext): the job layer's context itself.
    """

    __slots__ = ("unit_context", "settings", "source", "job_id", "unit", "attempt", "section", "input", "store")

    def __init__(self, ctx: UnitContext, rt: Runtime):
        self.unit_context, self.settings, self.source = ctx, rt.settings, rt.source
        self.job_id, self.unit, self.attempt = ctx.job_id, ctx.unit, ctx.attempt
        self.section, self.input, self.store = ctx.section, ctx.input, ctx.store

    @property
    def plan(self):
        return self.unit_context.plan

    @property
    def chunk(self) -> int:
        return self.unit_context.chunk

    @property
    def app(self) -> dict:
        return self.unit_context.app

    @property
    def rows(self) -> int:
        return self.unit_context.rows

    def write(self, columns, rows) -> None:
        """Append rows to the unit's result (see :meth:`UnitContext.write`)."""
        self.unit_context.write(columns, rows)

    def set_column_types(self, types) -> None:
        """Name the type of each column the unit writes (see :meth:`UnitContext.set_column_types`)."""
        self.unit_context.set_column_types(types)

    def set_partial(self, packed: bytes) -> None:
        """Leave the unit's partial aggregate (see :meth:`UnitContext.set_partial`)."""
        self.unit_context.set_partial(packed)
