"""Which compression libraries leave the CPU's vector registers dirty: ``python -m bench.vector_state``.

On x86-64 CPUs with AVX-512, code that writes the upper halves of the vector registers and
returns without VZEROUPPER leaves them "in use"; on Intel cores every later SSE instruction of
that thread then pays a penalty until something clears them (bench/README.md, "ISA-L in the
workers": a worker's statements 1.4-1.7x slower after one ISA-L call). The state is per thread.

This probe reads the XINUSE bitmap (``XGETBV`` with ECX=1) right after each library call, from
two four-byte machine-code stubs mapped executable and called through ctypes: bit 2 is the
upper halves of YMM0-15, bit 6 the upper halves of ZMM0-15 (the two an SSE instruction is
penalized for), bit 7 ZMM16-31 (glibc's EVEX string functions use those to stay clean). Each
call starts from a VZEROUPPER. It prints one JSON line per call, then whether a thread's dirty
state reaches the thread that started it. x86-64 Linux only.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import platform
import threading
import zlib

#: mov ecx, 1; xgetbv; shl rdx, 32; or rax, rdx; ret
_XGETBV1 = bytes.fromhex("B901000000" "0F01D0" "48C1E220" "4809D0" "C3")
#: vzeroupper; ret
_VZEROUPPER = bytes.fromhex("C5F877" "C3")


def _stub(code: bytes, restype):
    area = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    area.write(code)
    fn = ctypes.CFUNCTYPE(restype)(ctypes.addressof(ctypes.c_char.from_buffer(area)))
    fn.area = area  # the mapping lives as long as the function
    return fn


def _calls(data: bytes, packed: bytes) -> dict:
    calls = {"zlib.compress level 1": lambda: zlib.compress(data, 1),
             "zlib.decompress": lambda: zlib.decompress(packed)}
    try:
        import deflate
        calls["libdeflate zlib_compress level 1 (deflate)"] = lambda: deflate.zlib_compress(data, 1)
    except ImportError:
        pass
    try:
        from isal import isal_zlib
        calls["ISA-L compress level 1 (isal)"] = lambda: isal_zlib.compress(data, 1)
        calls["ISA-L decompress (isal)"] = lambda: isal_zlib.decompress(packed)
    except ImportError:
        pass
    try:
        import zstandard
        calls["zstd compress level 1 (zstandard)"] = lambda: zstandard.ZstdCompressor(level=1).compress(data)
    except ImportError:
        pass
    return calls


def main() -> int:
    if platform.machine() not in ("x86_64", "AMD64"):
        print(json.dumps({"skipped": f"x86-64 only, this is {platform.machine()}"}))
        return 0
    xinuse, vzeroupper = _stub(_XGETBV1, ctypes.c_uint64), _stub(_VZEROUPPER, None)
    data = os.urandom(1 << 16) + b"LOT-0001,DIE BOND,2026-12-05 10:00:00\n" * 20000
    packed = zlib.compress(data, 1)

    def bits(state: int) -> dict:
        return {"xinuse": hex(state), "ymm_upper_dirty": bool(state >> 2 & 1),
                "zmm_upper_dirty": bool(state >> 6 & 1), "zmm16_31_in_use": bool(state >> 7 & 1)}

    for name, call in _calls(data, packed).items():
        vzeroupper()
        call()
        print(json.dumps({"call": name, **bits(xinuse())}))
    from isal import isal_zlib  # the cross-thread check needs a library that leaves them dirty

    seen = {}
    vzeroupper()
    thread = threading.Thread(target=lambda: (isal_zlib.compress(data, 1), seen.update(bits(xinuse()))))
    thread.start()
    thread.join()
    print(json.dumps({"call": "ISA-L compress in another thread", "that thread": seen, "this thread": bits(xinuse())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
