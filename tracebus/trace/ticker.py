"""A function called from a background thread every few seconds while a block runs.

A unit that spends its time in one long call (a stage's single statement, the jobs domain's
one scan of DW_MES_JOB) has no loop of its own to heartbeat or renew a lease from; it runs
the call inside :func:`ticking`.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def ticking(every_s: float, tick: Callable[[], None], name: str) -> Iterator[None]:
    """Call ``tick()`` every ``every_s`` seconds from a daemon thread named ``name`` until the
    block ends; the thread is joined before the block's exit goes on. ``tick`` handles its own
    errors (one that escapes ends the ticking)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            tick()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
