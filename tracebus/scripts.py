"""Loads the Lua scripts in ``tracebus/lua/`` and registers them on a Redis client.

Files whose name starts with ``_`` are libraries: a script that calls their functions
lists them in :data:`PRELUDES` and gets them prepended, because Redis 7.0 scripts cannot
import one another.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

#: Library files prepended to the scripts that use them.
PRELUDES = {
    "requeue": ("_requeue_lib",),
    "autoclaim": ("_requeue_lib",),
    **{f"job_{name}": ("_jobstats_lib",) for name in ("create", "take", "begin", "cancel", "retry")},
    "job_settle": ("_jobstats_lib", "_fence_lib"),
    "result_write": ("_fence_lib",),
    "result_commit": ("_fence_lib",),
}


@cache
def source(name: str) -> str:
    """The Lua source of script ``name`` with its preludes."""
    lua = resources.files("tracebus") / "lua"
    parts = [(lua / f"{lib}.lua").read_text() for lib in PRELUDES.get(name, ())]
    parts.append((lua / f"{name}.lua").read_text())
    return "\n".join(parts)


def register(client, name: str):
    """A callable ``script(keys=[...], args=[...])`` that runs by EVALSHA (loading on NOSCRIPT)."""
    return client.register_script(source(name))
