"""The root of every tracebus error, and the two errors every layer shares.

Each layer keeps its own errors in its own ``errors`` module, all derived from
:class:`TracebusError`: :mod:`tracebus.engine.errors` (broker, actors, decoding),
:mod:`tracebus.jobs.errors` (job state and results) and :mod:`tracebus.trace.errors` (the
trace application). Driver errors (redis, sqlite3, oracledb) are translated at the boundary
where they occur. Errors a caller can cause carry an UPPER_SNAKE ``code``; what HTTP status
that becomes is decided once, in ``api/errors.py``, not here.
"""

from __future__ import annotations


class TracebusError(Exception):
    """Base class of every tracebus error.

    Attributes:
        message(str): what went wrong, for people.
        details(dict): extra fields a client may be shown (counts, limits).
    """

    code = "INTERNAL_ERROR"

    def __init__(self, message: str = "", **details):
        super().__init__(message)
        self.message = message
        self.details = details


class ConfigError(TracebusError):
    """A setting from the environment or the command line is invalid."""

    code = "CONFIG_ERROR"


class InvalidParams(TracebusError):
    """A request or argument is malformed; the message says which field and why."""

    code = "INVALID_PARAMS"
