"""Worker boot hooks: code that must run in each worker process after the fork.

Database pools, Oracle sessions and similar resources must never be inherited across
``fork()``; a module registers a function with :func:`on_worker_boot` and the
supervisor's child calls it once, after fork and before reading any message. A hook
that raises is a boot failure: the supervisor stops instead of respawning in a loop.
"""

from __future__ import annotations

from typing import Callable

_hooks: list[Callable[[], None]] = []


def on_worker_boot(fn: Callable[[], None]) -> Callable[[], None]:
    """Decorator: run ``fn()`` in every worker process right after it is forked."""
    if fn not in _hooks:
        _hooks.append(fn)
    return fn


def run_boot_hooks() -> None:
    for hook in list(_hooks):
        hook()
