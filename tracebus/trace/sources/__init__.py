"""Event sources: the embedded SQLite database or Oracle, behind one interface.

:func:`open_source` builds the source that ``TraceSettings.source`` names. Building opens no
connection; the source connects on first use, in the process that uses it.
"""

from __future__ import annotations

import os

from tracebus.trace.settings import TraceSettings
from tracebus.errors import ConfigError
from tracebus.trace.sources.base import IN_LIMIT, EventSource, unique_cids

__all__ = ["IN_LIMIT", "EventSource", "open_source", "source_identity", "unique_cids"]


def open_source(settings: TraceSettings) -> EventSource:
    """Return the event source configured by ``settings`` (no connection is opened yet).

    Raises:
        ConfigError: Oracle is selected but ``TRACEBUS_ORACLE_DSN`` is empty.
    """
    if settings.source == "oracle":
        if not settings.oracle_dsn:
            raise ConfigError("TRACEBUS_SOURCE=oracle needs TRACEBUS_ORACLE_DSN")
        from tracebus.trace.sources.oracle import OracleSource
        return OracleSource(settings.oracle_dsn, settings.oracle_user, settings.oracle_password,
                            call_timeout_ms=settings.oracle_call_timeout_ms)
    from tracebus.trace.sources.sqlite import SqliteSource
    return SqliteSource(settings.sqlite_path)


def source_identity(settings: TraceSettings) -> str:
    """What names the data the configured source reads, for the result keys of reuse
    (:meth:`tracebus.trace.kinds.JobKind.result_key`): ``sqlite:<absolute path>``, or
    ``oracle:<host:port/service>`` (the DSN without any ``user/password@``: no secret in a key)."""
    if settings.source == "oracle":
        return "oracle:" + settings.oracle_dsn.rsplit("@", 1)[-1].strip().lower()
    return "sqlite:" + os.path.abspath(settings.sqlite_path)
