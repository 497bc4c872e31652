"""Which compression calls leave the CPU's vector registers dirty: ``python -m bench.vector_state``.

On x86-64 CPUs with AVX-512, code that writes the upper halves of the vector registers and
returns without VZEROUPPER leaves them "in use"; on Intel cores every later SSE instruction of
that thread then pays a penalty until something clears them (bench/README.md, "ISA-L in the
workers": a worker's statements 1.4-1.7x slower after one ISA-L call). The state is per thread.

This probe reads the XINUSE bitmap (:func:`api.vector_registers.in_use`) right after each call,
each call starting from a VZEROUPPER, and prints one JSON line per call: the libraries the
workers and the API may use, the API's own gzip path (:func:`api.encodings.compressed`, ISA-L
followed by :func:`api.vector_registers.vzeroupper`), and whether a thread's dirty state reaches
the thread that started it. x86-64 Linux with AVX only.
"""

from __future__ import annotations

import json
import os
import threading
import zlib

from api import encodings, vector_registers


def _calls(data: bytes, packed: bytes) -> dict:
    calls = {"zlib.compress level 1": lambda: zlib.compress(data, 1),
             "zlib.decompress": lambda: zlib.decompress(packed),
             "api.encodings.compressed (gzip)": lambda: b"".join(encodings.compressed(iter([data, b"\n"]), "gzip"))}
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


def _bits(state: int) -> dict:
    return {"xinuse": hex(state), "ymm_upper_dirty": bool(state & vector_registers.YMM_UPPER),
            "zmm_upper_dirty": bool(state & vector_registers.ZMM_UPPER)}


def main() -> int:
    if vector_registers.in_use() is None:
        print(json.dumps({"skipped": "needs x86-64 Linux with AVX and XGETBV(1), and executable memory"}))
        return 0
    data = os.urandom(1 << 16) + b"LOT-0001,DIE BOND,2026-12-05 10:00:00\n" * 20000
    packed = zlib.compress(data, 1)
    for name, call in _calls(data, packed).items():
        vector_registers.vzeroupper()
        call()
        print(json.dumps({"call": name, **_bits(vector_registers.in_use())}))
    try:
        from isal import isal_zlib
    except ImportError:
        return 0
    seen = {}
    vector_registers.vzeroupper()
    thread = threading.Thread(target=lambda: (isal_zlib.compress(data, 1), seen.update(_bits(vector_registers.in_use()))))
    thread.start()
    thread.join()
    print(json.dumps({"call": "ISA-L compress in another thread", "that thread": seen,
                      "this thread": _bits(vector_registers.in_use())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
