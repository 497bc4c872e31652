"""The one error hierarchy of tracebus.

Every error the library raises derives from :class:`TracebusError`. Driver errors
(redis, sqlite3, oracledb) are translated at the boundary where they occur and
re-raised as one of these, so callers (the worker loop, the CLI, the HTTP API)
handle one family. Errors that a client can cause carry an UPPER_SNAKE ``code``
and an HTTP-ish ``status`` that ``api/`` maps to a response once.
"""

from __future__ import annotations


class TracebusError(Exception):
    """Base class of every tracebus error."""

    code = "INTERNAL_ERROR"
    status = 500

    def __init__(self, message: str = "", **details):
        super().__init__(message)
        self.message = message
        self.details = details


class ConfigError(TracebusError):
    """A setting from the environment or the command line is invalid."""

    code = "CONFIG_ERROR"


class BrokerError(TracebusError):
    """Something went wrong talking to the queue's Redis."""

    code = "SERVICE_UNAVAILABLE"
    status = 503


class BrokerConnectionError(BrokerError):
    """Redis could not be reached (refused, timed out, connection dropped)."""


class UnsupportedRedis(BrokerError):
    """The Redis server is too old or configured in a way tracebus refuses."""


class DecodeError(TracebusError):
    """A stream entry or stored value could not be decoded.

    Attributes:
        data (bytes): the raw bytes that failed to decode.
        error (Exception): the underlying decoder error.
    """

    code = "DECODE_ERROR"

    def __init__(self, message: str, data: bytes | None = None, error: Exception | None = None):
        super().__init__(message)
        self.data = data
        self.error = error


class ActorNotFound(TracebusError):
    """A message names an actor that is not registered in this process."""

    code = "ACTOR_NOT_FOUND"


class Retry(TracebusError):
    """Raised by an actor to ask for a retry, optionally after ``delay_ms``."""

    code = "RETRY"

    def __init__(self, message: str = "retry requested", delay_ms: int | None = None):
        super().__init__(message)
        self.delay_ms = delay_ms


class TimeLimitExceeded(TracebusError):
    """A message ran past its actor's time limit."""

    code = "TIME_LIMIT_EXCEEDED"


class WorkerBootError(TracebusError):
    """A worker process could not start (boot hook failed, Redis unreachable at boot)."""

    code = "WORKER_BOOT_ERROR"


# -- errors a client of the trace API can cause -------------------------------------------------


class InvalidParams(TracebusError):
    """A request is malformed; the message says which field and why."""

    code = "INVALID_PARAMS"
    status = 400


class InvalidProfile(InvalidParams):
    """The request names an unknown profile, or a domain the profile does not allow."""

    code = "INVALID_PROFILE"


class CidLimitExceeded(TracebusError):
    """More container ids than the hard cap ``TRACE_EVENTS_CID_LIMIT``."""

    code = "CID_LIMIT_EXCEEDED"
    status = 413


class QuotaExceeded(TracebusError):
    """The user already has the maximum number of queued or running jobs."""

    code = "QUOTA_EXCEEDED"
    status = 429

    def __init__(self, message: str, retry_after_s: int = 30, **details):
        super().__init__(message, **details)
        self.retry_after_s = retry_after_s


class JobNotFound(TracebusError):
    """No job with that id exists (or it belongs to another user)."""

    code = "JOB_NOT_FOUND"
    status = 404


class JobNotComplete(TracebusError):
    """The job's result was asked for before the job finished."""

    code = "JOB_NOT_COMPLETE"
    status = 409


class JobResultExpired(TracebusError):
    """The job existed but its result keys have expired."""

    code = "JOB_RESULT_EXPIRED"
    status = 404


class JobStateConflict(TracebusError):
    """The job is in a state that does not allow the action (cancel a finished job, ...)."""

    code = "JOB_STATE_CONFLICT"
    status = 409


class SourceError(TracebusError):
    """The event source (SQLite or Oracle) failed.

    Attributes:
        transient (bool): True when retrying the same query may succeed
            (connection lost, timeout, database locked).
    """

    code = "SOURCE_ERROR"

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class StaleAttempt(TracebusError):
    """A unit attempt was fenced off: a newer attempt of the same unit owns the result."""

    code = "STALE_ATTEMPT"
