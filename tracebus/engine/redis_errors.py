"""The one translation of redis-py's errors into the engine's errors, at the boundary.

Every layer that talks to Redis wraps its calls in :func:`redis_errors` (or decorates them
with :func:`translate_errors`): a dropped or refused connection becomes
:class:`~tracebus.engine.errors.BrokerConnectionError` (as do the errors of a failover:
READONLY, LOADING, MASTERDOWN), an out-of-memory refusal (``OOM command not allowed``)
:class:`~tracebus.engine.errors.RedisFull`, any other driver error
:class:`~tracebus.engine.errors.BrokerError`, so callers handle one family.
"""

from __future__ import annotations

import functools

import redis
from redis.exceptions import RedisClusterException

from tracebus.engine.errors import BrokerConnectionError, BrokerError, RedisFull

#: What a client is told when Redis refuses a write for lack of memory.
FULL_MESSAGE = "Redis is full (maxmemory reached, no eviction): it refuses new data until memory is freed"


#: "Redis is moving or unavailable": unreachable, loading its data, a demoted primary
#: (READONLY), or a primary the replicas/sentinels have lost (MASTERDOWN, no master known).
#: One class for every caller: back off and try again, never crash.
MOVING = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError,
          redis.exceptions.MasterDownError)


class _RedisErrors:
    """Context manager translating redis-py errors into the tracebus hierarchy.

    A class rather than a ``@contextmanager`` generator: it wraps every enqueue, and a
    reusable object costs a fraction of a generator per call.
    """

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, (redis.RedisError, RedisClusterException)):
            return False
        # A wrong or missing password is a ConnectionError to redis-py; said as what it is.
        if isinstance(error, redis.AuthenticationError):
            raise BrokerConnectionError(f"Redis authentication failed: {error} (the password in "
                                        f"REDIS_URL)") from error
        # RedisCluster raises RedisClusterException (not a RedisError) when no node answers.
        if isinstance(error, (*MOVING, RedisClusterException)):
            raise BrokerConnectionError(f"Redis unreachable: {error}") from error
        if is_oom(error):
            raise RedisFull(f"{FULL_MESSAGE} ({error})") from error
        raise BrokerError(f"Redis refused a command: {error}") from error


_REDIS_ERRORS = _RedisErrors()


def is_oom(error: BaseException) -> bool:
    """True for Redis's refusal of a write past ``maxmemory`` (also inside a script or MULTI)."""
    return isinstance(error, redis.exceptions.OutOfMemoryError) or (
        isinstance(error, redis.ResponseError) and "used memory > 'maxmemory'" in str(error))


def redis_errors() -> _RedisErrors:
    """``with redis_errors(): ...`` re-raises driver errors as BrokerConnectionError / BrokerError."""
    return _REDIS_ERRORS


def translate_errors(fn):
    """Decorator form of :func:`redis_errors`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _REDIS_ERRORS:
            return fn(*args, **kwargs)

    return wrapper
