"""The worker's module: ``tracebus worker tracebus.trace.tasks`` runs the units of every trace job kind.

Importing it registers every installed kind (:mod:`tracebus.trace.installed`), and registering
a kind declares its unit actor on the trace queue (:func:`tracebus.trace.kinds.register`); each
worker process builds its runtime (settings, source) right after the fork
(:func:`tracebus.trace.runtime.open_runtime`). The actors keep their names (they are carried
in every unit message): ``trace_unit`` (events), ``msd_unit``, ``trace_stage_unit`` (seed-resolve
and lineage), ``query_unit`` (the declared query kinds).
"""

from __future__ import annotations

from tracebus.trace import installed
from tracebus.trace.kinds import UNIT_MAX_RETRIES, unit_queue
from tracebus.trace.runtime import Runtime, open_runtime

__all__ = ["ACTOR_NAME", "UNIT_MAX_RETRIES", "Runtime", "open_runtime", "unit_queue",
           "trace_unit", "msd_unit", "query_unit", "trace_stage_unit"]

#: The events kind's unit actor's name (``trace_unit``).
ACTOR_NAME = installed.EVENTS.actor_name

#: The unit actors, by the names they always had.
trace_unit = installed.EVENTS.actor
msd_unit = installed.MSD.actor
query_unit = installed.QUERY.actor
trace_stage_unit = installed.STAGES.actor
