"""Errors of the trace application: bad trace requests and failing event sources."""

from __future__ import annotations

from tracebus.errors import InvalidParams, TracebusError


class TraceError(TracebusError):
    """Base class of the trace application's errors."""


class InvalidProfile(InvalidParams):
    """The request names an unknown profile, or a domain the profile does not allow."""

    code = "INVALID_PROFILE"


class NoDetectionRecords(TraceError):
    """Container-mode seed resolution found no lot at the detection station (the original's 404)."""

    code = "NO_DETECTION_RECORDS"


class CidLimitExceeded(TraceError):
    """More container ids than the hard cap ``TRACE_EVENTS_CID_LIMIT``."""

    code = "CID_LIMIT_EXCEEDED"


class CostLimitExceeded(TraceError):
    """A request would cost more than a declared limit (units, binds, stored bytes): 413."""

    code = "COST_LIMIT_EXCEEDED"


class SourceError(TraceError):
    """The event source (SQLite or Oracle) failed.

    Attributes:
        transient (bool): True when retrying the same query may succeed
            (connection lost, timeout, database locked).
    """

    code = "SOURCE_ERROR"

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient

    @property
    def retryable(self) -> bool:
        """Read by the retries middleware: only a transient failure is worth another try."""
        return self.transient

class CacheExpired(TraceError):
    """The stored data behind a trace_query_id expired (or never existed): 410."""

    code = "CACHE_EXPIRED"


class QueryNotFound(TraceError):
    """A trace_query_id that is not of the shape this API hands out (so no query has it): 404."""

    code = "QUERY_NOT_FOUND"
