"""Counting the statements a source runs, for the tests that prove a request read nothing.

:class:`CountingSqlite` is the real SQLite source that appends one line per statement it
executes to a file (any process: the API's and the workers', forked or not, append to the
same file); :func:`count` reads how many there are. ``tests.counting_tasks`` puts it in
every worker of a supervisor.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from tracebus.trace.sources.sqlite import SqliteSource

#: The environment variable naming the file the workers of ``tests.counting_tasks`` append to.
STATEMENT_LOG = "TB_TEST_STATEMENT_LOG"  # not TRACE*: start_supervisor drops those


class CountingSqlite(SqliteSource):
    """A :class:`SqliteSource` that appends the first words of every statement to ``log``."""

    def __init__(self, path, log: str | os.PathLike):
        super().__init__(path)
        self.log = os.fspath(log)

    def _execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        with open(self.log, "a", encoding="utf-8") as out:  # one short line: appends do not interleave
            out.write(" ".join(sql.split())[:80] + "\n")
        return super()._execute(sql, params, batch_rows)


def factory(log: Path):
    """A source factory (``TraceService(..., source_factory=)``) of counting sources."""
    return lambda settings: CountingSqlite(settings.sqlite_path, log)


def count(log: Path) -> int:
    """Statements appended to ``log`` so far."""
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0
