"""Test helpers: waiting on conditions with a deadline instead of bare sleeps."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02,
             message: str = "condition") -> T:
    """Poll ``condition`` until it returns a truthy value, or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {message}")
        time.sleep(interval_s)
