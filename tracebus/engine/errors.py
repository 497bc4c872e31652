"""Errors of the queue engine: the broker's Redis, messages, actors, time limits.

Every Redis driver error met by the engine is translated to :class:`BrokerError` or
:class:`BrokerConnectionError` at the boundary (:func:`tracebus.engine.redis_errors.redis_errors`),
so callers handle one family.
"""

from __future__ import annotations

from tracebus.errors import TracebusError


class EngineError(TracebusError):
    """Base class of the engine's errors."""


class BrokerError(EngineError):
    """Something went wrong talking to the queue's Redis."""

    code = "SERVICE_UNAVAILABLE"


class BrokerConnectionError(BrokerError):
    """Redis is moving or unavailable: refused, timed out, connection dropped, loading, or
    in a failover (READONLY from a demoted primary, MASTERDOWN, no master known). Callers
    back off and try again (:mod:`tracebus.engine.outage`)."""


class RedisFull(BrokerError):
    """Redis refused a write because it reached ``maxmemory`` (policy ``noeviction``).

    Not an outage: retrying at once does not help, and the data already stored is intact,
    so it is its own condition (the API answers 507 ``REDIS_FULL``; a unit that meets it
    fails its job at once instead of being retried).
    """

    code = "REDIS_FULL"
    retryable = False


class UnsupportedRedis(BrokerError):
    """The Redis server is too old or configured in a way tracebus refuses."""


class DecodeError(EngineError):
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


class ActorNotFound(EngineError):
    """A message names an actor that is not registered in this process."""

    code = "ACTOR_NOT_FOUND"


class Retry(EngineError):
    """Raised by an actor to ask for a retry, optionally after ``delay_ms``."""

    code = "RETRY"

    def __init__(self, message: str = "retry requested", delay_ms: int | None = None):
        super().__init__(message)
        self.delay_ms = delay_ms


class TimeLimitExceeded(EngineError):
    """A message ran past its actor's time limit."""

    code = "TIME_LIMIT_EXCEEDED"


class ResultError(EngineError):
    """Base class of the errors of reading a message's stored result."""


class ResultMissing(ResultError):
    """No result is stored for the message (not finished, not stored, or expired)."""

    code = "RESULT_MISSING"


class ResultTimeout(ResultError):
    """``get_result(block=True)`` waited its timeout and no result came."""

    code = "RESULT_TIMEOUT"


class ResultFailure(ResultError):
    """The message failed for good; its result is the failure.

    Attributes:
        error_type(str): the exception class the actor raised, e.g. ``ValueError``.
        error_message(str): its message.
        traceback(str): the end of its traceback, as the worker saw it.
    """

    code = "ACTOR_FAILED"

    def __init__(self, message: str, error_type: str = "", error_message: str = "", traceback: str = ""):
        super().__init__(message)
        self.error_type, self.error_message, self.traceback = error_type, error_message, traceback


class MessageNotFound(EngineError):
    """No queue, delayed set, dead-letter stream or stored result holds the message."""

    code = "MESSAGE_NOT_FOUND"
