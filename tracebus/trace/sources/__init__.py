"""Event sources: the embedded SQLite database, Oracle or PostgreSQL, behind one interface.

:func:`open_source` builds the source that ``TraceSettings.source`` names. Building opens no
connection; the source connects on first use, in the process that uses it. A source is the
generic capability (:mod:`.base`); the reads are written over what they need of it
(:mod:`.reads`): those more than one kind uses here (:mod:`.lineage`, :mod:`.windows`, the event
domains of :mod:`.base`), each kind's own in its folder.
"""

from __future__ import annotations

import os
import shlex
from typing import Callable, TypeVar
from urllib.parse import urlsplit

from tracebus.trace.settings import TraceSettings
from tracebus.errors import ConfigError
from tracebus.trace.errors import SourceError
from tracebus.trace.sources.base import IN_LIMIT, EventSource, unique_cids

T = TypeVar("T")

__all__ = ["IN_LIMIT", "EventSource", "open_source", "read_once", "source_identity", "unique_cids"]


def read_once(source_factory: Callable[[TraceSettings], EventSource], settings: TraceSettings,
              read: Callable[[EventSource], T]) -> T:
    """``read(source)`` on a source of its own, closed after (a request's read, off the workers)."""
    source = source_factory(settings)
    try:
        return read(source)
    finally:
        source.close()


def open_source(settings: TraceSettings) -> EventSource:
    """Return the event source configured by ``settings`` (no connection is opened yet).

    Raises:
        ConfigError: Oracle (PostgreSQL) is selected but ``TRACEBUS_ORACLE_DSN``
            (``TRACEBUS_POSTGRES_DSN``) is empty.
    """
    if settings.source == "postgres":
        if not settings.postgres_dsn:
            raise ConfigError("TRACEBUS_SOURCE=postgres needs TRACEBUS_POSTGRES_DSN")
        from tracebus.trace.sources.postgres import PostgresSource
        return PostgresSource(settings.postgres_dsn, statement_timeout_s=settings.source_statement_timeout_s,
                              dead_peer_s=settings.source_dead_peer_s)
    if settings.source == "oracle":
        if not settings.oracle_dsn:
            raise ConfigError("TRACEBUS_SOURCE=oracle needs TRACEBUS_ORACLE_DSN")
        from tracebus.trace.sources.oracle import OracleSource
        return OracleSource(settings.oracle_dsn, settings.oracle_user, settings.oracle_password,
                            call_timeout_ms=settings.oracle_call_timeout_ms,
                            statement_timeout_s=settings.source_statement_timeout_s)
    from tracebus.trace.sources.sqlite import SqliteSource
    return SqliteSource(settings.sqlite_path, statement_timeout_s=settings.source_statement_timeout_s)


def source_identity(settings: TraceSettings) -> str:
    """What names the data the configured source reads, for the result keys of reuse
    (:meth:`tracebus.trace.jobkind.JobKind.result_key`): ``sqlite:<absolute path>``,
    ``oracle:<host:port/service>`` (the DSN without any ``user/password@``) or
    ``postgres:<host>:<port>/<database>``: never a user or a password (no secret in a key)."""
    if settings.source == "oracle":
        return "oracle:" + settings.oracle_dsn.rsplit("@", 1)[-1].strip().lower()
    if settings.source == "postgres":
        return "postgres:" + _postgres_place(settings.postgres_dsn)
    return "sqlite:" + os.path.abspath(settings.sqlite_path)


def _postgres_place(dsn: str) -> str:
    """``host:port/database`` of a libpq DSN, a URL (``postgresql://user:pw@host:port/db?...``)
    or ``key=value`` words (``host=... port=... dbname=...``).

    Raises:
        SourceError: the DSN cannot be read (a 503 of the API, as a source that does not answer).
    """
    try:
        if "://" in dsn:
            url = urlsplit(dsn.strip())
            return f"{(url.hostname or '').lower()}:{url.port or 5432}{url.path or '/'}"
        words = dict(w.split("=", 1) for w in shlex.split(dsn) if "=" in w)
    except ValueError as e:
        from tracebus.trace.sources.postgres import redact

        raise SourceError(f"postgres: TRACEBUS_POSTGRES_DSN cannot be read ({redact(str(e), dsn)})") from None
    return f"{words.get('host', '').lower()}:{words.get('port', '5432')}/{words.get('dbname', '')}"
