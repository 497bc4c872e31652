"""How a streamed result goes out: its format by ``Accept``, its compression by ``Accept-Encoding``.

``Accept: application/vnd.msgpack`` (or ``application/msgpack``, ``application/x-msgpack``)
asks for the binary wire format (:mod:`tracebus.jobs.wire`); anything else, or no header,
gets NDJSON. NDJSON is compressed when the client offers ``zstd`` (used when the
``zstandard`` package is installed) or ``gzip``: each piece of the body is compressed and
flushed as it is produced, so the client can decode every line as soon as it arrives and
the API holds no more than before. ISA-L, which gzips, leaves the vector registers' upper
halves in use: each of its calls is followed by :func:`api.vector_registers.vzeroupper`.
NDJSON is built in a thread of its own, a few chunks ahead of the socket (:func:`ahead`).
The binary format is never compressed again: its chunks are stored zlib-compressed already.
"""

from __future__ import annotations

import queue
import threading
import zlib
from typing import Iterator

import falcon

from api.vector_registers import vzeroupper

try:  # ISA-L's deflate: the same gzip format, 4x faster than zlib at level 1 (see GZIP_LEVEL)
    from isal import isal_zlib as deflate
except ImportError:  # pragma: no cover - depends on the installation
    deflate = zlib
try:  # optional: zstd is offered only where the binding is installed (pip install 'tracebus[wire]')
    import zstandard
except ImportError:  # pragma: no cover - depends on the installation
    zstandard = None

#: Media types that ask for the binary format; the first is the one answered.
BINARY_TYPES = ("application/vnd.msgpack", "application/msgpack", "application/x-msgpack")
#: Measured on 17 MB of the 114K trace's NDJSON (history, materials, rejects), flushed per
#: chunk: zlib-1 7.8x at 146 MB/s, zlib-6 10.9x at 72 MB/s, ISA-L level 1 8.2x at 640 MB/s,
#: zstd-1 12.7x at 570 MB/s. The API writes NDJSON at ~110 MB/s, so zlib-1 alone doubled the
#: time of a gzip'd stream; ISA-L adds a sixth.
GZIP_LEVEL = 1
ZSTD_LEVEL = 1
#: zstd's window: 64 KB (level 1's own is 512 KB, and its context ~2 MB per open stream; a
#: records line repeats its keys every few hundred bytes, so the smaller window costs little).
ZSTD_WINDOW_LOG = 16
#: Headers of a negotiated response (caches must key on both).
VARY = "Accept, Accept-Encoding"
#: Pieces the producer thread of an NDJSON stream may run ahead of the socket (a piece is a few
#: hundred rows of a records line, ~100 KB): bounds the memory a slow client can pin. One: with 4
#: whole lines (and the feed's 8 chunks read ahead) an unread stream pinned ~24 MB (issue 24).
AHEAD_PIECES = 1
#: Longest wait for a closed stream's producer to end (it checks every half second, and may be
#: in a follow's blocking read of up to a second).
JOIN_S = 2.0


def wants_binary(req: falcon.Request, default_type: str) -> bool:
    """Whether the client prefers the binary format to ``default_type``."""
    accept = req.get_header("Accept") or ""
    if "msgpack" not in accept:
        return False
    return req.client_prefers([default_type, *BINARY_TYPES]) in BINARY_TYPES


def choose_coding(accept_encoding: str | None) -> str | None:
    """``"zstd"``, ``"gzip"`` or None (identity) for an ``Accept-Encoding`` header."""
    offered = {}
    for item in (accept_encoding or "").split(","):
        name, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name:
            offered[name.strip().lower()] = q
    if zstandard is not None and offered.get("zstd", 0) > 0:
        return "zstd"
    if offered.get("gzip", 0) > 0 or offered.get("x-gzip", 0) > 0:
        return "gzip"
    return None


def compressed(body: Iterator[bytes], coding: str) -> Iterator[bytes]:
    """``body`` compressed with ``coding``, flushed after every piece; closing it closes ``body``.

    Give it a ``body`` that runs :func:`ahead`: the compressors release the GIL, so producing
    the NDJSON (Python, in that thread) and compressing it (C, in this one) overlap.
    """
    if coding == "zstd":
        c = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters.from_level(
            ZSTD_LEVEL, window_log=ZSTD_WINDOW_LOG)).compressobj()
        flush_block, finish = (lambda: c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)), c.flush
    else:
        c = deflate.compressobj(GZIP_LEVEL, deflate.DEFLATED, 31)  # wbits 31: a gzip header and trailer
        flush_block, finish = (lambda: c.flush(deflate.Z_SYNC_FLUSH)), c.flush
    try:
        for piece in body:
            # flushed at the end of each line (a records line comes in several pieces)
            out = c.compress(piece) + flush_block() if piece.endswith(b"\n") else c.compress(piece)
            vzeroupper()  # after ISA-L, before this thread runs anything else (api.vector_registers)
            if out:
                yield out
        out = finish()
        vzeroupper()
        yield out
    finally:
        _close(body)


def _close(body: Iterator[bytes]) -> None:
    """Close ``body`` when it can be closed (a generator: its ``finally`` runs now)."""
    close = getattr(body, "close", None)
    if close is not None:
        close()


_END = object()


def ahead(body: Iterator[bytes], depth: int) -> Iterator[bytes]:
    """The pieces of ``body``, produced by a daemon thread at most ``depth`` pieces ahead.

    Building NDJSON (decode a chunk, make the row objects, encode them) holds the GIL; writing
    to the socket and compressing do not. With the building in its own thread, the next
    chunk's line is made while the previous one is compressed and sent: on the 114K result
    the gzip'd stream went from 1.59x the time of plain NDJSON to 1.10x (bench/README.md).

    An exception of ``body`` is raised here, after the pieces before it; closing this
    generator (the client went away) stops the thread, which closes ``body``.
    """
    pieces: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    thread = threading.Thread(target=_produce, args=(body, pieces, stop), name="stream-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = pieces.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        # Let the producer end (and free what it holds) before the caller goes on: the memory
        # of a closed stream is given back as its slot is released (api/heap.py).
        _drain(pieces)
        thread.join(JOIN_S)


def _produce(body: Iterator[bytes], pieces: queue.Queue, stop: threading.Event) -> None:
    """The thread of :func:`ahead`: ``body``'s pieces into ``pieces``, then :data:`_END` or the
    exception ``body`` raised; it stops when ``stop`` is set, and closes ``body``."""
    try:
        for piece in body:
            if not _put(pieces, piece, stop):
                return
        _put(pieces, _END, stop)
    except BaseException as e:  # handed to the consumer, which raises it
        _put(pieces, e, stop)
    finally:
        _close(body)


def _put(pieces: queue.Queue, item, stop: threading.Event) -> bool:
    """Put ``item`` into ``pieces``, waiting for room; False (not put) once ``stop`` is set."""
    while not stop.is_set():
        try:
            pieces.put(item, timeout=0.5)
            return True
        except queue.Full:
            continue
    return False


def _drain(pieces: queue.Queue) -> None:
    """Empty ``pieces`` (a producer blocked on a full queue sees the stop at once)."""
    while True:
        try:
            pieces.get_nowait()
        except queue.Empty:
            break
