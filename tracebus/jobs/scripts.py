"""The job layer's Lua scripts (``tracebus/jobs/lua/``): job state, fenced results and partials.

Every state change of a job is one of these scripts; each file opens with its KEYS/ARGV
contract. :func:`script` registers one on a client with its preludes.
"""

from __future__ import annotations

import redis

from tracebus.engine.scripts import ScriptLibrary

JOB_SCRIPTS = ScriptLibrary("tracebus.jobs", {
    **{f"job_{name}": ("_jobstats_lib",) for name in ("create", "take", "begin", "cancel", "retry")},
    "job_abandon": (),
    "job_resume": (),
    "job_settle": ("_jobstats_lib", "_fence_lib"),
    "result_write": ("_fence_lib",),
    "result_commit": ("_fence_lib",),
})


def script(client: redis.Redis, name: str):
    """Register the Lua script ``tracebus/jobs/lua/<name>.lua`` on ``client``.

    Returns:
        redis.commands.core.Script: call it with ``keys=`` and ``args=``.
    """
    return JOB_SCRIPTS.register(client, name)
