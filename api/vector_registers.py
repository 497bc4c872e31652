"""The VZEROUPPER that ISA-L does not do: clearing the vector registers' upper halves after it.

ISA-L's deflate (the ``isal`` package, which gzips NDJSON streams: :mod:`api.encodings`) is
hand-written assembly that returns with the upper halves of the YMM/ZMM registers still in use.
On an Intel CPU with AVX-512 every later SSE instruction of that thread then pays for it, until
something clears them, which nothing else in the process does: a worker that called it once ran
its SQLite statements and Python 1.4-1.7x slower from then on (bench/README.md, "ISA-L in the
workers"). In a gevent worker the thread is the loop's, which serves every request.

:func:`vzeroupper` runs the instruction from a four-byte stub mapped executable and called
through ctypes (about a microsecond). Where that cannot be done (not x86-64 Linux with AVX, or a
system that refuses executable anonymous memory) it does nothing: without AVX there is no upper
half to clear. :func:`in_use` reads the XINUSE bitmap (``XGETBV`` with ECX=1), for the probe
``python -m bench.vector_state`` and the tests.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
from typing import Callable

#: vzeroupper; ret
_VZEROUPPER = bytes.fromhex("C5F877" "C3")
#: mov ecx, 1; xgetbv; shl rdx, 32; or rax, rdx; ret
_XGETBV1 = bytes.fromhex("B901000000" "0F01D0" "48C1E220" "4809D0" "C3")
#: XINUSE bits: the upper halves of YMM0-15 and of ZMM0-15 (what SSE code is penalized for).
YMM_UPPER, ZMM_UPPER = 1 << 2, 1 << 6


def _cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as info:
            return next((set(line.split(":", 1)[1].split()) for line in info if line.startswith("flags")), set())
    except OSError:
        return set()


def _stub(code: bytes, restype, needs: str) -> Callable | None:
    """``code`` (x86-64 machine code ending in ``ret``) as a callable, or None where it cannot
    be: not x86-64, the CPU without the ``needs`` feature (the instruction would fault), or no
    executable memory to be had."""
    if platform.machine() not in ("x86_64", "AMD64") or needs not in _FLAGS:
        return None
    try:
        area = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError):  # W^X enforced, or no mmap.PROT_EXEC on this platform
        return None
    area.write(code)
    fn = ctypes.CFUNCTYPE(restype)(ctypes.addressof(ctypes.c_char.from_buffer(area)))
    fn.area = area  # the mapping lives as long as the function
    return fn


_FLAGS = _cpu_flags()
_clear = _stub(_VZEROUPPER, None, "avx")
_xgetbv1 = _stub(_XGETBV1, ctypes.c_uint64, "xgetbv1")


def vzeroupper() -> None:
    """Mark the calling thread's vector registers' upper halves unused (nothing where it cannot)."""
    if _clear is not None:
        _clear()


def in_use() -> int | None:
    """The calling thread's XINUSE bitmap (test with :data:`YMM_UPPER`, :data:`ZMM_UPPER`), or
    None where it cannot be read."""
    return _xgetbv1() if _xgetbv1 is not None else None
