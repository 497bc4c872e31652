"""The embedded event source: the synthetic SQLite database, opened read-only."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Iterator

from tracebus.trace.errors import SourceError
from tracebus.trace.sources.base import EventSource
from tracebus.trace.sources.queries import SQLITE

_TRANSIENT = ("database is locked", "database table is locked", "busy", "interrupted", "disk i/o error")


def translate(exc: sqlite3.Error) -> SourceError:
    """Map an sqlite3 error to a SourceError; lock contention and I/O hiccups are transient."""
    text = str(exc)
    transient = isinstance(exc, sqlite3.OperationalError) and any(t in text.lower() for t in _TRANSIENT)
    return SourceError(f"sqlite: {text}", transient=transient)


class SqliteSource(EventSource):
    """Reads the synthetic database at ``path`` (see :mod:`tracebus.trace.synth`).

    Args:
        path: the SQLite file; it must exist (it is opened read-only, never created).
        busy_timeout_ms: how long a query waits for a writer's lock before failing
            with a transient SourceError.
    """

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike, busy_timeout_ms: int = 5000, statement_timeout_s: int = 0):
        self.path = os.fspath(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.statement_timeout_s = statement_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._thread: int | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.busy_timeout_ms / 1000,
                               check_same_thread=False)

    def _connection(self) -> tuple[sqlite3.Connection, bool]:
        """``(connection, private)``: the source's own, or for a statement run from another
        thread than the one that opened it (the step-A windows) a private one it closes."""
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                # After fork the inherited connection belongs to the parent: drop it unclosed.
                self._conn, self._pid, self._thread = self._open(), os.getpid(), threading.get_ident()
            elif self._thread != threading.get_ident():
                return self._open(), True
            return self._conn, False

    def _execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        with self._statement() as st:
            cursor = conn = private = None
            # The statement timeout, as PostgreSQL's on a server-side cursor: per round of fetching.
            deadline = [0.0]
            try:
                conn, private = self._connection()
                if self.statement_timeout_s:
                    conn.set_progress_handler(lambda: time.monotonic() > deadline[0], 10_000)
                st.bind(conn.interrupt)
                deadline[0] = time.monotonic() + self.statement_timeout_s
                cursor = conn.execute(sql, params)
                while rows := cursor.fetchmany(batch_rows):
                    yield rows
                    deadline[0] = time.monotonic() + self.statement_timeout_s
            except sqlite3.Error as exc:
                raise self._failure(st, exc, deadline[0]) from exc
            except GeneratorExit:
                raise
            except BaseException:
                st.abort()
                raise
            finally:
                st.bind(None)
                if cursor is not None:
                    cursor.close()
                if conn is not None and self.statement_timeout_s:
                    conn.set_progress_handler(None, 0)
                if private:
                    conn.close()

    def _failure(self, st, exc: sqlite3.Error, deadline: float) -> Exception:
        """What a statement's sqlite3 error is raised as: the cancel's error when the statement
        was cancelled (its interrupt), the statement timeout's when the progress handler
        interrupted it past ``deadline``, else :func:`translate`'s."""
        if st.reason is not None:
            return st.error()
        if self.statement_timeout_s and time.monotonic() > deadline and "interrupt" in str(exc):
            return self.timeout_error()
        return translate(exc)

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = self._pid = self._thread = None
