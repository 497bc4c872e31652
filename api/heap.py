"""Giving the memory of closed streams back to the system (glibc's ``malloc_trim``).

A streamed body allocates and frees many pieces of a few hundred KB while it is read; glibc
keeps freed heap pages in the process, so an API worker that served a burst of streams stayed
at its peak RSS after they closed (30 unread NDJSON streams: 131 -> 172 MB, issue 39).
:func:`trim` asks glibc to return its free pages; it is called when a worker's last open
stream closes, and at most once a second otherwise. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time

#: Least time between two trims while streams keep closing.
MIN_INTERVAL_S = 1.0


def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_trim = _malloc_trim()
_last = float("-inf")


def trim(force: bool = False) -> bool:
    """Return free heap pages to the system (``force``: even within :data:`MIN_INTERVAL_S` of the
    last time); True when it ran."""
    global _last
    now = time.monotonic()
    if _trim is None or (not force and now - _last < MIN_INTERVAL_S):
        return False
    _last = now
    _trim(0)
    return True
