"""The job layer's Lua scripts (``tracebus/jobs/lua/``), called by the names their headers declare.

Every state change of a job is one of these scripts. The header contract and the calling by
name are the engine's (:mod:`tracebus.engine.scripts`); this module names the job scripts'
preludes.
"""

from __future__ import annotations

import redis

from tracebus.engine.scripts import NamedScript, ScriptLibrary, Signature

JOB_SCRIPTS = ScriptLibrary("tracebus.jobs", {
    "job_metrics": ("_jobstats_lib",),
    "job_cancel": ("_jobtime_lib",),
    "job_settle": ("_jobtime_lib", "_fence_lib"),
    "result_write": ("_fence_lib",),
    "result_commit": ("_fence_lib",),
})


def signature(name: str) -> Signature:
    """The KEYS/ARGV contract declared at the top of ``tracebus/jobs/lua/<name>.lua``."""
    return JOB_SCRIPTS.signature(name)


def script(client: redis.Redis, name: str) -> NamedScript:
    """Register the Lua script ``tracebus/jobs/lua/<name>.lua`` on ``client``.

    Returns:
        NamedScript: call it with ``keys`` and ``args`` mappings of the names its header declares.
    """
    return JOB_SCRIPTS.register(client, name)
