"""The supervisor's housekeeping of the queues, run from its loop about ten times a second.

A mixin of :class:`tracebus.engine.supervisor.Supervisor`, kept apart from the process side
(fork, reap, murder, manage, signals): each step is run when it is due, and a Redis outage
only backs the whole pass off (:class:`tracebus.engine.outage.Outage`), never the loop.
The steps: promote due delayed messages, refresh the worker registry, sweep every declared
queue with the XAUTOCLAIM janitor, remove gone consumers from the group, requeue what reaped
children held, send the ticks of periodic actors, and give the middleware's
``supervisor_tick`` hooks a turn.
"""

from __future__ import annotations

import logging
import time

from tracebus.engine import recovery
from tracebus.engine.errors import BrokerConnectionError, BrokerError, RedisFull

# The supervisor's logger: these lines are the supervisor's, as they were before the split.
log = logging.getLogger("tracebus.engine.supervisor")

#: How often the group is cleaned of gone consumers, and how long one must be idle (and
#: hold nothing) to be gone.
_FORGET_EVERY_S = 30.0
_FORGET_IDLE_MS = 60_000


class Housekeeping:
    """The Redis side of the supervisor's loop. Expects ``settings``, ``broker``, ``queues``,
    ``children``, ``registry``, ``janitor``, ``scheduler``, ``tick_hooks``, ``unreclaimed``
    (consumer, reason pairs of reaped children), ``timers``, ``stopping_at`` and ``outage``."""

    def _due(self, name: str, every_s: float) -> bool:
        now = time.monotonic()
        if now - self.timers.get(name, 0.0) >= every_s:
            self.timers[name] = now
            return True
        return False

    def housekeeping(self) -> None:
        if not self.outage.due():  # Redis away: try again after the backoff, not every tick
            return
        try:
            self._tend_queues()
        except BrokerConnectionError as e:
            self.outage.failed(e)
            return
        except BrokerError as e:
            log.error("supervisor housekeeping: %s", e)
        self.outage.recovered()
        self._run_tick_hooks()

    def _tend_queues(self) -> None:
        """The Redis half of housekeeping, each step when it is due. A :class:`BrokerError`
        ends the pass (the caller reports it; the steps after it wait for the next tick)."""
        for q in self.queues:
            self.broker.promote_due(q)
        # Workers renew their own leases (recovery.LeaseKeeper); the janitor takes what
        # a dead or frozen worker held once it idled past the claim time.
        claim_s = self.settings.claim_min_idle_ms / 1000
        if self._due("registry", min(claim_s / 4, 5.0)):
            self._refresh_registry()
        if self._due("janitor", claim_s / 3):
            self.janitor.sweep(self._declared_queues())
        if self._due("forget", _FORGET_EVERY_S):
            self._forget_gone_consumers()
        if self.unreclaimed:
            self._reclaim()
        if self.scheduler is not None and self.stopping_at is None:
            self.scheduler.run_due()

    def _refresh_registry(self) -> None:
        """Mark the children whose heartbeat is fresh as alive in the worker registry."""
        now = time.monotonic()
        try:
            self.registry.touch([c.consumer for c in self.children.values()
                                 if now - c.slot.last_heartbeat <= self.settings.heartbeat_timeout_s])
        except RedisFull:
            pass  # informational; the janitor after it must still run when Redis is full

    def _forget_gone_consumers(self) -> None:
        """Remove from every declared queue's group the consumers idle long enough to be gone."""
        for q in self._declared_queues():
            self.broker.forget_consumers(q, max(3 * self.settings.claim_min_idle_ms, _FORGET_IDLE_MS))

    def _run_tick_hooks(self) -> None:
        """Give each middleware's ``supervisor_tick`` a turn; one failing does not stop the others."""
        for hook in self.tick_hooks:
            try:
                hook.supervisor_tick(self)
            except BrokerError as e:
                log.error("supervisor housekeeping (%s): %s", type(hook).__name__, e)
            except Exception:
                log.exception("supervisor housekeeping (%s) failed", type(hook).__name__)

    def _declared_queues(self) -> list[str]:
        """Every queue any host declared, not only this pool's: the janitor covers them all."""
        return sorted(set(self.queues) | set(self.broker.queues()))

    def _reclaim(self) -> None:
        """Requeue what reaped children held. Redis away: stop and keep the rest for later
        (:class:`BrokerConnectionError` is the caller's to report, once)."""
        still = []
        for i, (consumer, reason) in enumerate(self.unreclaimed):
            try:
                recovery.reclaim_consumer(self.broker, self.queues, consumer, reason)
                self.registry.remove(consumer)
            except BrokerConnectionError:
                self.unreclaimed = still + self.unreclaimed[i:]
                raise
            except BrokerError as e:
                log.error("cannot reclaim %s yet: %s", consumer, e)
                still.append((consumer, reason))
        self.unreclaimed = still
