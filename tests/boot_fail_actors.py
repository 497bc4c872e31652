"""A module whose worker boot hook always fails (the supervisor must halt, not respawn)."""

from __future__ import annotations

import tracebus


@tracebus.actor(queue="boot-fail")
def never_runs():
    """Declared so the module has a queue to read."""


@tracebus.on_worker_boot
def connect_to_a_database_that_is_down():
    raise ConnectionRefusedError("the database is down")
