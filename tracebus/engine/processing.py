"""Running one delivery: through the middleware to its actor, then settling it.

A mixin of :class:`tracebus.engine.worker.Worker`, kept apart from the loop that reads and
acks batches. A delivery whose payload or arguments can never run is dead-lettered on first
sight (:func:`arguments_mismatch`); otherwise its actor runs inside every middleware's
``before_process``/``after_process``, and the outcome is settled: ack with the batch on
success, or offered to the middleware (the retries middleware schedules a delayed copy)
and dead-lettered with its traceback when none settles it. A lost Redis is not the actor's
failure: it goes up to the loop, which requeues the delivery once Redis is back.
"""

from __future__ import annotations

import inspect
import logging
import traceback

from tracebus import logs
from tracebus.engine.actor import get_actor
from tracebus.engine.errors import ActorNotFound, BrokerConnectionError
from tracebus.engine.message import Delivery

# The worker's logger: these lines are the worker's, as they were before the split.
log = logging.getLogger("tracebus.engine.worker")


class Processing:
    """Run and settle one delivery. Expects ``broker``, ``middleware``, ``_on_success`` (the
    middleware overriding ``after_success``, innermost first), ``_acks`` (entry ids to ack
    per queue), ``done``, ``current``, ``failure_reason``, ``_running`` and
    ``_maybe_register``, which :class:`tracebus.engine.worker.Worker` provides."""

    def process(self, delivery: Delivery) -> None:
        """Run one delivery and settle it: ack (batched), retry later, or dead-letter."""
        self._running = delivery
        if delivery.message is None:
            log.error("entry %s of %s dead-lettered: undecodable", delivery.entry_id, delivery.queue_name)
            self.broker.dead_letter(delivery, "undecodable entry")
            self._running = None
            return
        # Every line logged while the message runs or is settled names it (and its job).
        with logs.context(**logs.message_fields(delivery.message)):
            self._process(delivery)
        self._running = None  # settled (left set when Redis went away before it was)

    def _process(self, delivery: Delivery) -> None:
        message = delivery.message
        try:
            actor = get_actor(message.actor_name)
        except ActorNotFound as e:
            log.error("message %s dead-lettered: %s", message.message_id, e)
            self.broker.dead_letter(delivery, str(e))
            return
        mismatch = arguments_mismatch(actor.fn, message.args, message.kwargs)
        if mismatch is not None:
            # Its arguments can never run (``tracebus send trace_unit '"x"'``): every middleware
            # would trip on them, each delivery again; dead-letter it on first sight instead.
            log.error("message %s (%s) dead-lettered: undecodable arguments: %s", message.message_id,
                      message.actor_name, mismatch)
            self.broker.dead_letter(delivery, f"undecodable arguments for {message.actor_name}: {mismatch}")
            return
        self.current = message
        self._maybe_register()
        error = result = None
        try:
            for m in self.middleware:
                m.before_process(self, actor, message)
            result = actor.fn(*message.args, **message.kwargs)
        except Exception as e:
            error = e
        finally:
            for m in reversed(self.middleware):
                m.after_process(self, actor, message, error)
            self.current = None
        if isinstance(error, BrokerConnectionError):
            # Redis moved or went away: not the actor's failure. The loop waits for Redis and
            # requeues this delivery then (see _recover), without spending a retry on it.
            raise error
        self.done += 1
        if error is None:
            for m in self._on_success:
                m.after_success(self, actor, message, result)
            self._acks[delivery.queue_name].append(delivery.entry_id)
        else:
            self._settle_failure(delivery, actor, error)

    def _settle_failure(self, delivery: Delivery, actor, error: Exception) -> None:
        # A middleware that declines to settle may say why (the retries middleware: "gave up
        # after 3 retries"); the dead-letter record keeps the first reason given.
        self.failure_reason = ""
        for m in reversed(self.middleware):
            try:
                if m.handle_failure(self, actor, delivery, error):
                    return
            except BrokerConnectionError:
                raise
            except Exception as e:  # a middleware tripping on this message must not kill the worker
                log.error("message %s: %s could not settle its failure (%s: %s); dead-lettering it",
                          delivery.message.message_id, type(m).__name__, type(e).__name__, e)
                break
        message = delivery.message
        reason = self.failure_reason or f"failed: {type(error).__name__}: {error}"
        trace = "".join(traceback.format_exception(error))[-3000:]
        log.error("message %s (%s) dead-lettered: %s", message.message_id, message.actor_name, reason)
        self.broker.dead_letter(delivery, f"{reason}\n{trace}", failed=True)

    def ack_later(self, delivery: Delivery) -> None:
        """Ack ``delivery`` with the current batch (for a middleware that settles a failure)."""
        self._acks[delivery.queue_name].append(delivery.entry_id)


def arguments_mismatch(fn, args: tuple, kwargs: dict) -> str | None:
    """Why ``fn`` cannot be called with ``args`` and ``kwargs`` (None: it can)."""
    try:
        signature = _signatures.get(fn) or _signatures.setdefault(fn, inspect.signature(fn))
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return None
    if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
        return f"args must be a list and kwargs a map, got {type(args).__name__} and {type(kwargs).__name__}"
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        return str(e)
    return None


#: inspect.signature of each actor function, computed once.
_signatures: dict = {}
