"""Event sources: the embedded SQLite database, Oracle or PostgreSQL, behind one interface.

:func:`open_source` builds the source that ``TraceSettings.source`` names. Building opens no
connection; the source connects on first use, in the process that uses it.
"""

from __future__ import annotations

from tracebus.trace.settings import TraceSettings
from tracebus.errors import ConfigError
from tracebus.trace.sources.base import IN_LIMIT, EventSource, unique_cids

__all__ = ["IN_LIMIT", "EventSource", "open_source", "unique_cids"]


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
        return PostgresSource(settings.postgres_dsn)
    if settings.source == "oracle":
        if not settings.oracle_dsn:
            raise ConfigError("TRACEBUS_SOURCE=oracle needs TRACEBUS_ORACLE_DSN")
        from tracebus.trace.sources.oracle import OracleSource
        return OracleSource(settings.oracle_dsn, settings.oracle_user, settings.oracle_password,
                            call_timeout_ms=settings.oracle_call_timeout_ms,
                            statement_timeout_s=settings.source_statement_timeout_s)
    from tracebus.trace.sources.sqlite import SqliteSource
    return SqliteSource(settings.sqlite_path, statement_timeout_s=settings.source_statement_timeout_s)
