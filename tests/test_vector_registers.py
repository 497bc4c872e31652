"""The compressors tracebus runs leave the calling thread's vector registers clean.

ISA-L returns with the upper halves of the YMM/ZMM registers in use, and on an Intel CPU with
AVX-512 that slows every later SSE instruction of the thread (bench/README.md, "ISA-L in the
workers"). The API's gzip streams use ISA-L and clear them after each call
(api/vector_registers.py); the workers' chunk deflate is libdeflate's, which clears them itself.
Read here with XGETBV(1) on the test's own thread: skipped where that cannot be read.
"""

from __future__ import annotations

import os

import pytest

from api import encodings, vector_registers
from tracebus.jobs.chunkcodec import encode_chunk

pytestmark = pytest.mark.skipif(vector_registers.in_use() is None,
                                reason="XINUSE is read on x86-64 Linux with AVX and XGETBV(1) only")
DIRTY = vector_registers.YMM_UPPER | vector_registers.ZMM_UPPER


def dirty() -> int:
    return vector_registers.in_use() & DIRTY


def ndjson_pieces(n: int = 40) -> list[bytes]:
    rows = [b'{"CONTAINERID":"GA%08d","SPECNAME":"DIE BOND","TRACKINTIMESTAMP":"2026-12-05 10:%02d:00"}'
            % (i, i % 60) for i in range(2000)]
    # a records line in several pieces: every other piece ends one (and is flushed)
    return [b"\n".join(rows) + os.urandom(512) + (b"\n" if i % 2 else b"") for i in range(n)]


def test_a_gzipd_stream_gives_every_piece_with_the_registers_clean():
    vector_registers.vzeroupper()
    seen = []
    for piece in encodings.compressed(iter(ndjson_pieces()), "gzip"):
        assert piece
        seen.append(dirty())
    assert len(seen) >= 20 and not any(seen), [hex(s) for s in seen]


def test_isal_itself_leaves_them_in_use_here_or_the_check_above_proves_nothing():
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    vector_registers.vzeroupper()
    isal_zlib.compress(b"".join(ndjson_pieces(4)), 1)
    if not dirty():
        pytest.skip("ISA-L's deflate leaves this CPU's registers clean (no AVX2/AVX-512 path)")
    vector_registers.vzeroupper()
    assert not dirty()


def test_a_worker_encoding_result_chunks_keeps_them_clean():
    rows = [[f"GA{i:08d}", "DIE BOND", "2026-12-05 10:00:00", i, None] for i in range(5000)]
    vector_registers.vzeroupper()
    for _ in range(5):
        encode_chunk(["CONTAINERID", "SPEC", "TS", "QTY", "NOTE"], rows)
        assert not dirty()
