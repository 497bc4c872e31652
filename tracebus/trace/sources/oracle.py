"""The production event source: Oracle 19c (schema DWH) through python-oracledb thin mode.

The pool is created on first use in the process that uses it (a worker, after fork), never
inherited; every statement runs with ``call_timeout`` and fetches with
``arraysize = batch_rows``. CIDs are bind variables ``:p0 .. :p999``. Each session says what
it serves (``module`` ``tracebus``, ``action`` the job and unit, ``client_identifier`` the
user: ``V$SESSION``), and a statement is stopped on the server by ``Connection.cancel()`` (a
break on the session's own connection) when its job ends or its unit is interrupted
(:mod:`.control`).
"""

from __future__ import annotations

import os
import threading
from typing import Iterator

import oracledb

from tracebus.trace.errors import SourceError
from tracebus.trace.sources.base import EventSource
from tracebus.trace.sources.queries import ORACLE

#: Error codes after which the same query may succeed on a new attempt: lost or refused
#: connections, timeouts, instance shutting down or starting, cancelled calls.
TRANSIENT_CODES = frozenset({
    "DPY-1001", "DPY-4005", "DPY-4011", "DPY-4024", "DPY-6000", "DPY-6005",
    "ORA-00028", "ORA-01012", "ORA-01013", "ORA-01033", "ORA-01034", "ORA-01089", "ORA-02396",
    "ORA-03113", "ORA-03114", "ORA-03135", "ORA-12170", "ORA-12514", "ORA-12528", "ORA-12537",
    "ORA-12541", "ORA-12543", "ORA-25408",
})


def translate(exc: oracledb.Error) -> SourceError:
    """Map an oracledb error to a SourceError, transient for the codes above or recoverable errors."""
    error = exc.args[0] if exc.args else None
    code = getattr(error, "full_code", "") or ""
    transient = code in TRANSIENT_CODES or bool(getattr(error, "isrecoverable", False))
    return SourceError(f"oracle: {exc}", transient=transient)


class OracleSource(EventSource):
    """Reads the DWH event tables.

    Args:
        dsn: ``host:port/service``.
        user, password: the read-only account.
        call_timeout_ms: limit of one round trip (``Connection.call_timeout``); 0 is none.
        pool_max: connections of this process's pool; 3, the step-A windows run at a time.
    """

    dialect = ORACLE

    def __init__(self, dsn: str, user: str, password: str, call_timeout_ms: int = 60000,
                 pool_max: int = 3, statement_timeout_s: int = 0):
        self.dsn, self.user, self._password = dsn, user, password
        self.statement_timeout_s = statement_timeout_s
        # TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S, when set, is the round trip's limit.
        self.call_timeout_ms = statement_timeout_s * 1000 if statement_timeout_s else call_timeout_ms
        self.pool_max = pool_max
        self._pool: oracledb.ConnectionPool | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()  # the step-A windows' threads share the pool

    def _get_pool(self) -> oracledb.ConnectionPool:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = oracledb.create_pool(
                    user=self.user, password=self._password, dsn=self.dsn, min=0, max=self.pool_max,
                    increment=1, getmode=oracledb.POOL_GETMODE_TIMEDWAIT, wait_timeout=60000)
                self._pid = os.getpid()
            return self._pool

    def _execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        with self._statement() as st:
            try:
                with self._get_pool().acquire() as conn:
                    conn.call_timeout = self.call_timeout_ms
                    conn.module, conn.client_identifier = "tracebus", st.user[:64]
                    conn.action = (f"{st.job_id} {st.unit}" if st.job_id else "")[-32:]
                    st.bind(conn.cancel)
                    try:
                        with conn.cursor() as cursor:
                            cursor.arraysize = batch_rows
                            cursor.prefetchrows = batch_rows + 1
                            cursor.execute(sql, params)
                            while rows := cursor.fetchmany(batch_rows):
                                yield rows
                    except (oracledb.Error, GeneratorExit):
                        raise
                    except BaseException:
                        st.abort()  # the unit was interrupted mid-statement: stop it on the server
                        raise
                    finally:
                        st.bind(None)
            except oracledb.Error as exc:
                if st.reason is not None:
                    raise st.error() from exc
                error = exc.args[0] if exc.args else None
                if self.statement_timeout_s and getattr(error, "full_code", "") == "DPY-4024":
                    raise self.timeout_error() from exc
                raise translate(exc) from exc

    def ping(self) -> bool:
        try:
            with self._get_pool().acquire() as conn:
                conn.ping()
        except oracledb.Error as exc:
            raise translate(exc) from exc
        return True

    def close(self) -> None:
        if self._pool is not None and self._pid == os.getpid():
            try:
                self._pool.close(force=True)
            except oracledb.Error:
                pass  # closing a pool whose server is gone must not mask the original error
        self._pool = self._pid = None
