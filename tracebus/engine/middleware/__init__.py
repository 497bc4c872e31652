"""Feature hooks around running a message (Dramatiq's middleware idea).

A :class:`Middleware` overrides no-op hooks; the worker calls them in order (``after_*``
in reverse), so the worker loop never learns about retries, time limits or jobs. The
stack a worker runs is built outside the loop by :func:`build_stack`:

1. middleware declared by imported modules with :func:`declare` (a job layer declares
   its hooks when one of its actors is defined),
2. middleware named on the command line (``tracebus worker --middleware mod:Class``) or in
   ``TRACEBUS_MIDDLEWARE``, loaded with :func:`load`,
3. the defaults: :class:`~tracebus.engine.middleware.results.Results` (asked about a
   failure only after the retries middleware declined to retry it), then
   :class:`~tracebus.engine.middleware.retries.Retries`, then
   :class:`~tracebus.engine.middleware.time_limit.TimeLimit` innermost, so the alarm is
   disarmed before any other after-hook runs.
"""

from __future__ import annotations

import importlib
from typing import Callable, Iterable

from tracebus.errors import ConfigError


class Middleware:
    """Base class: every hook is a no-op."""

    def after_worker_boot(self, worker) -> None:
        """Called once in each worker process, after the fork and before the first message."""

    def before_process(self, worker, actor, message) -> None:
        """Called just before the actor runs."""

    def after_process(self, worker, actor, message, error: BaseException | None) -> None:
        """Called after the actor returned (``error`` None) or raised."""

    def supervisor_tick(self, supervisor) -> None:
        """Called by each supervisor's housekeeping, about ten times a second: periodic work
        of a layer above the engine (the job sweeper). Throttle yourself; errors are logged."""
    def after_success(self, worker, actor, message, result) -> None:
        """Called after ``after_process`` when the actor returned ``result`` without raising."""

    def handle_failure(self, worker, actor, delivery, error: BaseException) -> bool:
        """Offered a failed delivery, innermost first (like the ``after_*`` hooks), until one
        returns True: the retries middleware, near the inside, is asked before the
        middleware declared by applications.

        Returns:
            bool: True when this middleware settled the entry itself (scheduled a retry,
            acked it with :meth:`Worker.ack_later`); False lets the next one try (it may set
            ``worker.failure_reason`` to say why it gave up). A failure nobody settles is
            dead-lettered by the worker, with that reason.
        """
        return False


_declared: list[Callable[[], Middleware]] = []


def declare(factory: Callable[[], Middleware]) -> None:
    """Have every worker of this process image install ``factory()`` (once per factory)."""
    if factory not in _declared:
        _declared.append(factory)


def load(spec: str) -> Middleware:
    """Instantiate ``"package.module:ClassName"``.

    Raises:
        ConfigError: the spec is malformed, the module or class is missing, or the class is
            not a :class:`Middleware`.
    """
    module_name, _, name = spec.strip().partition(":")
    if not module_name or not name:
        raise ConfigError(f"middleware must be given as module:Class, got {spec!r}")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot load middleware {spec!r}: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, Middleware)):
        raise ConfigError(f"middleware {spec!r} is not a tracebus Middleware subclass")
    return cls()


def build_stack(specs: Iterable[str] = ()) -> list[Middleware]:
    """The stack a worker runs: declared, then named by ``specs``, then the defaults."""
    from tracebus.engine.middleware.results import Results
    from tracebus.engine.middleware.retries import Retries
    from tracebus.engine.middleware.time_limit import TimeLimit

    stack = [factory() for factory in _declared]
    stack += [load(s) for s in specs if s.strip()]
    return [*stack, Results(), Retries(), TimeLimit()]
