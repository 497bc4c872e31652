"""Results for any actor, opt-in (Dramatiq's Results middleware): ``store_results=True``.

When an actor (or one message, through ``send_with_options``) sets ``store_results``, the
worker keeps what the actor returned, msgpack-encoded, in a one-element Redis list
``P:result:<message_id>`` that expires after ``result_ttl_ms`` (default
``TRACEBUS_RESULT_TTL_SECONDS``). A message that fails for good (no retry left) stores its
failure instead, so a caller waiting on it learns of the failure rather than timing out;
failures that will be retried store nothing. :func:`get_result` reads it back, waiting with
BLMOVE (the list moved onto itself: a reader never consumes the value) when asked to block.
"""

from __future__ import annotations

import logging
import time
import traceback as tb

import msgpack

from tracebus.engine.errors import ResultFailure, ResultMissing, ResultTimeout
from tracebus.engine.middleware import Middleware
from tracebus.engine.redis_errors import redis_errors

log = logging.getLogger(__name__)

#: Tags of a stored outcome: ``[OK, value]`` or ``[FAILED, type, message, traceback]``.
OK, FAILED = 1, 0
#: Default wait of a blocking :func:`get_result`, in ms (Dramatiq's default).
DEFAULT_TIMEOUT_MS = 10_000
#: Longest single BLMOVE; a slice is also at most half the client's socket timeout
#: (:func:`_slice_s`), so a long wait is never a read that times out.
_WAIT_SLICE_S = 5.0


def _slice_s(broker) -> float:
    """The longest BLMOVE this broker's client can wait out: half its socket timeout (a
    ``TRACEBUS_REDIS_TIMEOUT_SECONDS`` of 4 s would cut a 5 s BLMOVE off as "Timeout reading")."""
    pool = getattr(broker.client, "connection_pool", None)
    socket_timeout = getattr(pool, "connection_kwargs", {}).get("socket_timeout", broker.settings.redis_timeout_s)
    if not socket_timeout:  # no socket timeout: a read waits as long as the command
        return _WAIT_SLICE_S
    return max(0.1, min(_WAIT_SLICE_S, socket_timeout / 2))


def encode_failure(error: BaseException) -> bytes:
    trace = "".join(tb.format_exception(error))[-3000:]
    return msgpack.packb([FAILED, type(error).__name__, str(error), trace], use_bin_type=True)


def encode_value(value) -> bytes:
    """The stored form of a return value; one that msgpack cannot encode is stored as a failure."""
    try:
        return msgpack.packb([OK, value], use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        error = TypeError(f"the actor's return value cannot be stored as msgpack: {e}")
        return msgpack.packb([FAILED, "UnstorableResult", str(error), ""], use_bin_type=True)


def decode(message_id: str, data: bytes):
    """The value of a stored outcome.

    Raises:
        ResultFailure: the stored outcome is a failure.
    """
    outcome = msgpack.unpackb(data, raw=False)
    if outcome[0] == OK:
        return outcome[1]
    _, kind, text, trace = outcome
    raise ResultFailure(f"message {message_id} failed: {kind}: {text}", error_type=kind,
                        error_message=text, traceback=trace)


def store(broker, message, payload: bytes, ttl_ms: int) -> None:
    """Replace the stored outcome of ``message`` with ``payload`` (expiring after ``ttl_ms``)."""
    key = broker.keys.result(message.message_id)
    with redis_errors():
        pipe = broker.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.rpush(key, payload)
        pipe.pexpire(key, int(ttl_ms))
        pipe.execute()


def get_result(broker, message_id: str, block: bool = False, timeout: int | None = None):
    """The stored result of a message (see :meth:`tracebus.Message.get_result`).

    Args:
        block(bool): wait for the result when it is not there yet.
        timeout(int): how long to wait, in ms (default 10,000).

    Raises:
        ResultMissing: not blocking, and no result is stored (yet, or any more).
        ResultTimeout: blocking, and none came within ``timeout``.
        ResultFailure: the message failed for good.
    """
    key = broker.keys.result(message_id)
    with redis_errors():
        if not block:
            data = broker.client.lindex(key, 0)
            if data is None:
                raise ResultMissing(f"no result stored for message {message_id}")
            return decode(message_id, data)
        deadline = time.monotonic() + (DEFAULT_TIMEOUT_MS if timeout is None else timeout) / 1000
        slice_s = _slice_s(broker)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ResultTimeout(f"no result for message {message_id} within "
                                    f"{DEFAULT_TIMEOUT_MS if timeout is None else timeout} ms")
            data = broker.client.blmove(key, key, min(left, slice_s), "RIGHT", "RIGHT")
            if data is not None:
                return decode(message_id, data)


class Results(Middleware):
    """Stores the outcome of messages whose ``store_results`` option is set."""

    @staticmethod
    def _ttl_ms(worker, actor, message) -> int:
        ttl_ms = actor.option(message, "result_ttl_ms")
        return int(ttl_ms) if ttl_ms else worker.broker.settings.result_ttl_s * 1000

    def after_success(self, worker, actor, message, result) -> None:
        # per message: two dict lookups when results are off (actor.option costs more)
        if message.options.get("store_results", actor.options.get("store_results")):
            store(worker.broker, message, encode_value(result), self._ttl_ms(worker, actor, message))

    def handle_failure(self, worker, actor, delivery, error) -> bool:
        # Asked after the retries middleware: reaching here means no retry was scheduled.
        message = delivery.message
        if actor.option(message, "store_results"):
            store(worker.broker, message, encode_failure(error), self._ttl_ms(worker, actor, message))
        return False
