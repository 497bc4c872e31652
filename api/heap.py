"""Giving the memory of closed streams back to the system (glibc's ``malloc_trim``).

A streamed body allocates and frees many pieces of a few hundred KB while it is read; glibc
keeps freed heap pages in the process, so an API worker that served a burst of streams stayed
at its peak RSS after they closed (30 unread NDJSON streams: 131 -> 172 MB, issue 39).
:func:`trim` asks glibc to return its free pages; it is called when a worker's last open
stream closes, and at most once a second otherwise; :func:`fix_mmap_threshold` (called as
a worker starts) keeps large blocks out of the heap. Elsewhere than glibc both do nothing.
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
#: glibc's mallopt parameter, and the size from which a block is its own mapping (its default;
#: fixed, it no longer rises to 32 MB after the first large free, so the stored chunks and the
#: pieces of a stream, freed, are unmapped at once instead of fragmenting the heap).
_M_MMAP_THRESHOLD, MMAP_THRESHOLD = -3, 128 * 1024


def fix_mmap_threshold() -> bool:
    """Keep large blocks in mappings of their own in this process (glibc); True when set."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc
        return False


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
