"""Feature hooks around running a message (Dramatiq's middleware idea).

A :class:`Middleware` overrides no-op hooks; the worker calls them in order, so the
worker loop never learns about retries or time limits.
"""

from __future__ import annotations


class Middleware:
    """Base class: every hook is a no-op."""

    def before_process(self, worker, actor, message) -> None:
        """Called just before the actor runs."""

    def after_process(self, worker, actor, message, error: BaseException | None) -> None:
        """Called after the actor returned (``error`` None) or raised."""
