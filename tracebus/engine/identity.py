"""Process identity: the one place consumer names are made.

A consumer name is ``host:pid:tag``: unique per process start (``tag`` is a random boot id
for a worker, or a role such as ``janitor``), readable in ``XINFO CONSUMERS`` and in the
worker registry, and parseable back into its host and pid.
"""

from __future__ import annotations

import os
import socket


def new_boot_id() -> str:
    """A short random id that tells apart two processes that reused one pid."""
    return os.urandom(3).hex()


def consumer_name(pid: int | None = None, tag: str | None = None) -> str:
    """The consumer name of process ``pid`` (this one by default) with ``tag`` (random by default)."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}:{tag or new_boot_id()}"
