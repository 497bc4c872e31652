"""The PostgreSQL event source, through psycopg 3: server-side cursors, batch by batch.

Every statement runs in :meth:`PostgresSource._execute`, the one place a connection is taken
and a statement sent: a read-only transaction on a connection of this process's small pool,
a named (server-side) cursor that the server holds the result in, and ``FETCH batch_rows`` per
batch, so the client never holds more than one batch of a result. The statements are the
:data:`~.queries.POSTGRES` dialect's, written with ``:name`` binds as for the other sources;
:func:`pg_params` turns them into psycopg's ``%(name)s``. NUMERIC values come back as the
other sources give them: an int when whole, else a float (:class:`NumberLoader`).

Connections are opened on first use in the process that uses them (a worker, after fork),
never inherited: a pool found in another process is dropped unclosed, as SQLite's connection.
The step-A windows run statements from three threads at once: each takes a connection of its
own from the pool.

Control (:mod:`.control`, issue 35): a statement's session is named ``tracebus <job> <unit>
#<attempt> <user>`` (``application_name``, for the statement's transaction; an idle session is
``tracebus``), cancels any statement an earlier attempt of its unit left running (a frozen
worker's), and is stopped on the server by ``Connection.cancel_safe()`` when its job ends or
its unit is interrupted. Every session is opened with ``statement_timeout``
(``TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S``), ``client_connection_check_interval`` (PostgreSQL 14+:
the backend of a worker killed mid-statement notices the closed socket within
:data:`CLIENT_CHECK_MS`), and TCP keepalives and ``tcp_user_timeout`` within
``TRACEBUS_SOURCE_DEAD_PEER_S``; a statement silent for half of it is probed on a connection of
its own, and its connection cut when the server does not answer (a frozen server).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import socket
import threading
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import unquote

import psycopg
from psycopg.adapt import Loader

from tracebus.trace.errors import SourceError
from tracebus.trace.sources.base import EventSource
from tracebus.trace.sources.queries import POSTGRES

#: SQLSTATE classes after which the same statement may succeed on a new attempt: connection
#: exceptions, transaction rollbacks (serialization, deadlock), insufficient resources
#: (too many connections, out of memory or disk), operator intervention (a cancelled
#: statement, a statement timeout, the server shutting down or starting up), system errors.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})
#: ``client_connection_check_interval`` of every session: how soon the backend of a dead
#: worker stops its statement.
CLIENT_CHECK_MS = 1000
#: How long a cancel request may take (a frozen server never answers one).
CANCEL_TIMEOUT_S = 2.0

_BIND = re.compile(r"('(?:[^']|'')*')|(::)|:([A-Za-z_]\w*)|(%)")


@functools.lru_cache(maxsize=512)
def pg_params(sql: str) -> str:
    """``sql`` with ``:name`` binds as psycopg's ``%(name)s`` and every other ``%`` doubled
    (string literals are left alone but for their ``%``; ``::`` casts are kept)."""
    def sub(m: re.Match) -> str:
        literal, cast, name, percent = m.groups()
        if literal is not None:
            return literal.replace("%", "%%")
        if cast is not None:
            return cast
        if name is not None:
            return f"%({name})s"
        return "%%"

    return _BIND.sub(sub, sql)


class NumberLoader(Loader):
    """NUMERIC as the SQLite sample and python-oracledb give a NUMBER: an int when whole, else a float."""

    def load(self, data) -> int | float:
        text = bytes(data)
        whole, dot, fraction = text.partition(b".")
        if not dot:
            return int(text) if text.lstrip(b"-").isdigit() else float(text)  # NaN, Infinity
        if not fraction.strip(b"0"):
            return int(whole)
        return float(text)


class TimestampLoader(Loader):
    """A timestamp as ISO text ``YYYY-MM-DD HH:MM:SS``, as the other sources return dates
    (the statements format their dates themselves; this covers a bare one)."""

    def load(self, data) -> str:
        return bytes(data).decode()


_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s\"]*:)[^@\s\"]*@")
_DSN_PASSWORDS = (re.compile(r"^[A-Za-z]+://[^:/@]*:(.*)@"),  # URI userinfo
                  re.compile(r"[?&]password=([^&]*)"),  # URI query
                  re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'?|\S+)"))  # key/value


def redact(text: str, dsn: str = "") -> str:
    """``text`` without the password of ``dsn`` nor of any PostgreSQL URL in it: libpq's
    parse errors quote the DSN, or the token of it they could not read."""
    secrets_ = set()
    for pattern in _DSN_PASSWORDS:
        for found in pattern.findall(dsn or ""):
            found = found.strip("'")
            secrets_ |= {found, unquote(found)} if found else set()
    for secret in sorted(secrets_, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URI_PASSWORD.sub(r"\1***@", text)


def translate(exc: psycopg.Error, dsn: str = "") -> SourceError:
    """Map a psycopg error to a SourceError, transient for :data:`TRANSIENT_CLASSES`, a lost
    connection or a failed connect. The message never carries the password of ``dsn`` (the
    one connected to) nor of a URL libpq quotes; nor does ``exc``'s, which a traceback of the
    SourceError raised from it shows (a dead letter keeps one)."""
    exc.args = tuple(redact(a, dsn) if isinstance(a, str) else a for a in exc.args)
    state = getattr(exc, "sqlstate", None) or ""
    transient = state[:2] in TRANSIENT_CLASSES or (not state and isinstance(exc, psycopg.OperationalError))
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SourceError(f"postgres: {redact(text, dsn)}", transient=transient)


class PostgresSource(EventSource):
    """Reads the DWH tables from PostgreSQL.

    Args:
        dsn: a libpq URL or key/value string (``postgresql://user:password@host:port/db``).
        pool_max: idle connections this process keeps for reuse (the step-A windows run 3 at a time).
        connect_timeout_s: how long a connect may take before it fails (transient).
        statement_timeout_s: the sessions' ``statement_timeout`` (0: none).
        dead_peer_s: a connection silent this long is dead (keepalives, ``tcp_user_timeout``,
            the probe of a silent statement).
    """

    dialect = POSTGRES

    def __init__(self, dsn: str, pool_max: int = 3, connect_timeout_s: int = 10, statement_timeout_s: int = 0,
                 dead_peer_s: int = 30):
        self._dsn = dsn
        self.pool_max = pool_max
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.dead_peer_s = dead_peer_s
        self._idle: list[psycopg.Connection] = []
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._names = itertools.count(1)

    def __repr__(self) -> str:  # never the DSN: it may carry a password
        return f"PostgresSource(pool_max={self.pool_max})"

    def connect(self) -> psycopg.Connection:
        """A new connection of this source: read-only transactions, NUMERIC and timestamp
        loaders. Raises psycopg.Error."""
        # A session is known dead when TCP gets no answer: keepalive probes from a third of the
        # limit, and unacknowledged data for the limit.
        conn = psycopg.connect(self._dsn, connect_timeout=self.connect_timeout_s, application_name="tracebus",
                               options=f"-c statement_timeout={self.statement_timeout_s * 1000}",
                               keepalives=1, keepalives_idle=max(1, self.dead_peer_s // 3),
                               keepalives_interval=max(1, self.dead_peer_s // 9), keepalives_count=3,
                               tcp_user_timeout=self.dead_peer_s * 1000)
        # Set apart from the options: a server before 14 does not know it (and refuses a
        # connection whose options name an unknown parameter).
        conn.execute("SELECT set_config('client_connection_check_interval', %s, false) "
                     "WHERE current_setting('server_version_num')::int >= 140000", [str(CLIENT_CHECK_MS)])
        conn.commit()
        conn.read_only = True
        conn.adapters.register_loader("numeric", NumberLoader)
        conn.adapters.register_loader("timestamp", TimestampLoader)
        return conn

    def _acquire(self) -> psycopg.Connection:
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()  # the parent's: dropped unclosed
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return self.connect()

    def _release(self, conn: psycopg.Connection, healthy: bool) -> None:
        if healthy and not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with self._lock:
                if self._pid == os.getpid() and len(self._idle) < self.pool_max:
                    self._idle.append(conn)
                    return
        conn.close()

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection]:
        """A connection of this process's pool for one statement, given back afterwards (closed
        instead when the statement failed or left its transaction open)."""
        conn = self._acquire()
        try:
            yield conn
        except psycopg.Error:
            self._release(conn, False)
            raise
        except BaseException:  # a reader that stopped early (GeneratorExit), an interrupt
            self._release(conn, True)
            raise
        self._release(conn, True)

    def ping(self) -> bool:
        self.probe(self.connect_timeout_s)
        return True

    def probe(self, timeout_s: float) -> None:
        """Connect and run ``SELECT 1`` within ``timeout_s`` (a connection of its own, closed).

        Raises:
            SourceError: the server did not answer in time or refused.
        """
        try:
            with psycopg.connect(self._dsn, connect_timeout=max(1, int(timeout_s)), application_name="tracebus probe",
                                 options=f"-c statement_timeout={max(1, int(timeout_s * 1000))}") as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            raise translate(exc, self._dsn) from exc

    def _execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        with self._statement() as st:
            try:
                with self.session() as conn:
                    try:
                        if st.job_id is not None:
                            # Named for this transaction (the rollback below names the idle session
                            # "tracebus" again); an earlier attempt's statement of the same unit, left
                            # running by a frozen worker, is cancelled in the same round trip.
                            conn.execute(
                                "SELECT set_config('application_name', %(name)s, false), "
                                "(SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity "
                                " WHERE application_name LIKE %(unit)s AND application_name <> %(name)s "
                                " AND state = 'active' AND pid <> pg_backend_pid())",
                                {"name": st.label[:63], "unit": _like_prefix(st.unit_prefix)})
                        st.bind(functools.partial(conn.cancel_safe, timeout=CANCEL_TIMEOUT_S))
                        st.watch_peer(self.probe, functools.partial(_sever, conn), self.dead_peer_s)
                        with conn.cursor(name=f"tracebus_{next(self._names)}") as cursor:
                            cursor.itersize = batch_rows
                            cursor.execute(pg_params(sql), params)
                            st.heard()
                            while rows := cursor.fetchmany(batch_rows):
                                st.heard()
                                yield rows
                    except (psycopg.Error, GeneratorExit):
                        raise
                    except BaseException:
                        # The unit was interrupted mid-statement (its time limit): stop the
                        # statement on the server; the connection is left mid-reply, so closed.
                        st.abort()
                        conn.close()
                        raise
                    finally:
                        st.bind(None)
                        if not conn.closed and not conn.broken:
                            conn.rollback()  # ends the read-only transaction (and its cursor)
            except psycopg.Error as exc:
                if st.reason is not None:
                    raise st.error() from exc
                if self.statement_timeout_s and isinstance(exc, psycopg.errors.QueryCanceled) \
                        and "statement timeout" in str(exc):
                    raise self.timeout_error() from exc
                raise translate(exc, self._dsn) from exc

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                for conn in self._idle:
                    conn.close()
            self._idle, self._pid = [], None


def _sever(conn: psycopg.Connection) -> None:
    """Cut ``conn``'s socket under the thread waiting on it (its server went silent): that
    thread's wait ends with an error at once. The connection is not used again."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.close()


def _like_prefix(text: str) -> str:
    """A LIKE pattern for names starting with ``text`` (its ``%``, ``_`` and ``\\`` escaped)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
