"""The trace worker module (``tracebus.trace.tasks``) with a counting source: every statement a
worker's source runs appends a line to the file ``TB_TEST_STATEMENT_LOG`` names
(:mod:`tests.statement_count`)."""

from __future__ import annotations

import os

from tests.statement_count import STATEMENT_LOG, CountingSqlite
from tracebus.engine.boot import on_worker_boot
from tracebus.trace import runtime, tasks  # noqa: F401  (every kind's unit actor, then the runtime's hook)


@on_worker_boot
def count_statements() -> None:
    """After the runtime's own hook: its source replaced by a counting one on the same database."""
    rt = runtime.current()
    rt.source = CountingSqlite(rt.settings.sqlite_path, os.environ[STATEMENT_LOG])
