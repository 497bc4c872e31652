"""Typed, frozen messages and their msgpack codec.

A :class:`Message` is what an actor's ``send`` produces and what a worker runs. It is
encoded with msgpack as a positional array (never pickle) so entries stay small and
any language can read them. The stream-entry id (``Delivery.entry_id``) is kept
apart from the ``message_id``: a retried message keeps its ``message_id`` but is a
new stream entry.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field

import msgpack

from tracebus.engine.errors import DecodeError

#: Version tag of the encoded layout; bump when the field list changes.
FORMAT = 1


#: Returns the process's current broker, for :meth:`Message.get_result`. Set by
#: :mod:`tracebus.engine.actor`, which owns that broker and imports this module.
broker_of_process = None


def new_message_id() -> str:
    """A random 128-bit id as 32 hex chars (uuid4 strength, a third of its cost)."""
    return os.urandom(16).hex()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Message:
    """One actor invocation.

    Attributes:
        queue_name(str): the queue it is sent to.
        actor_name(str): the registered actor that runs it.
        args(tuple): positional arguments (msgpack-serialisable).
        kwargs(dict): keyword arguments (msgpack-serialisable).
        options(dict): per-message options; ``retries`` counts retries so far, and any
            actor option (``max_retries``, ``time_limit_ms``, ...) may be overridden.
        message_id(str): stable across retries.
        message_timestamp_ms(int): when it was first created.
    """

    queue_name: str
    actor_name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    message_id: str = field(default_factory=new_message_id)
    message_timestamp_ms: int = field(default_factory=now_ms)

    def encode(self) -> bytes:
        """Encode as a msgpack array."""
        return msgpack.packb(
            [FORMAT, self.queue_name, self.actor_name, list(self.args), self.kwargs,
             self.options, self.message_id, self.message_timestamp_ms],
            use_bin_type=True,
        )

    @classmethod
    def decode(cls, data: bytes) -> "Message":
        """Decode bytes produced by :meth:`encode`.

        Raises:
            DecodeError: the bytes are not an encoded message (the raw bytes are kept
                on the error so they can be dead-lettered as they were).
        """
        try:
            fmt, queue, actor, args, kwargs, options, mid, ts = msgpack.unpackb(data, raw=False)
            if fmt != FORMAT:
                raise ValueError(f"unknown message format {fmt!r}")
            if not (isinstance(queue, str) and isinstance(actor, str) and isinstance(args, list)
                    and isinstance(kwargs, dict) and isinstance(options, dict)):
                raise ValueError("message fields have the wrong types")
            return cls(queue, actor, tuple(args), kwargs, options, mid, ts)
        except Exception as e:  # msgpack raises several unrelated types
            raise DecodeError(f"undecodable message: {e}", data=data, error=e) from None

    def get_result(self, block: bool = False, timeout: int | None = None, broker=None):
        """What the actor returned, when it stores results (``store_results=True``).

        Args:
            block(bool): wait until the message has run (or failed for good).
            timeout(int): the wait, in ms (default 10,000).
            broker: where to read it (default: the broker this process sends through).

        Raises:
            ResultMissing: not blocking and no result is stored (not run yet, or expired).
            ResultTimeout: blocking and no result within ``timeout``.
            ResultFailure: the message failed for good; the error says what it raised.
        """
        from tracebus.engine.middleware.results import get_result

        return get_result(broker or broker_of_process(), self.message_id, block=block, timeout=timeout)

    def copy(self, **changes) -> "Message":
        """A copy with some fields changed (``options`` is merged, not replaced)."""
        if "options" in changes:
            changes["options"] = {**self.options, **changes["options"]}
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message as read from a stream by one consumer.

    Attributes:
        queue_name(str): the queue (stream) it was read from.
        entry_id(str): the stream entry id, used to ack it.
        message(Message | None): the decoded message, None when undecodable.
        raw(bytes): the encoded payload as stored.
        prior_deliveries(int): deliveries before this entry was (re)queued.
    """

    queue_name: str
    entry_id: str
    message: Message | None
    raw: bytes
    prior_deliveries: int = 0
