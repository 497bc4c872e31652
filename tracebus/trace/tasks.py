"""The worker's module: ``tracebus worker tracebus.trace.tasks`` runs the units of every trace job kind.

Importing it registers every installed kind (:mod:`tracebus.trace.installed`), and registering
a kind declares its unit actor on the trace queue (:func:`tracebus.trace.kinds.register`); each
worker process builds its runtime (settings, source) right after the fork
(:func:`tracebus.trace.runtime.open_runtime`). The actors keep their names (they are carried
in every unit message and recorded with each job): each kind says its own
(:attr:`~tracebus.trace.jobkind.JobKind.actor_name`), and :data:`ACTORS` lists them.
"""

from __future__ import annotations

from tracebus.trace import installed, kinds
from tracebus.trace.jobkind import UNIT_MAX_RETRIES
from tracebus.trace.kinds import unit_queue
from tracebus.trace.runtime import Runtime, open_runtime

__all__ = ["ACTORS", "UNIT_MAX_RETRIES", "Runtime", "installed", "open_runtime", "unit_queue"]

#: Every registered kind's unit actor, by its name.
ACTORS = {kind.actor_name: kind.actor for kind in kinds.registered().values()}
