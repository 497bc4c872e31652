"""Encoding of one stored result chunk: msgpack ``{"columns", "rows"}``, optionally zlib'd.

Rows are arrays under one column header, never dicts that repeat every key. A stored
value starts with a one-byte header: ``0x00`` plain msgpack, ``0x01`` zlib (level 1)
of the msgpack. Compression is kept only when it saves at least a tenth, so small or
incompressible chunks are not paid for twice.

Measured on one 5,000-row chunk of 15-column history-like rows (random, so less
repetitive than real MES data), encode / decode per chunk:
JSON list of dicts 2.23 MB, 45 / 40 ms; msgpack columns+rows 0.81 MB, 5 / 12 ms;
msgpack + zlib-1 0.33 MB, 19 / 16 ms (zlib-6: 0.27 MB but 44 ms to compress).
zlib-1 costs ~14 ms more per chunk against seconds of Oracle time per unit and cuts
Redis memory and transfer 2.5x, so it is on by default.

The deflate is libdeflate's (the ``deflate`` package; the standard library's zlib where it is
not installed), the inflate the standard library's: the same zlib format either way. libdeflate
deflates a 5,000-row history chunk in 0.99 ms to zlib level 1's 2.17 ms, 7% smaller; deflating
was half of what a worker spends beyond its statements (``python -m bench.unit_costs``). Not
ISA-L's (``isal``, faster still): on a CPU with AVX-512 one ISA-L call leaves the vector
registers' upper halves dirty (no VZEROUPPER) and every later instruction of the thread pays for
it, a worker's SQLite statements and Python code 1.4-1.7x slower from its first chunk on
(measured on an Intel Xeon). libdeflate and zlib leave them clean (``python -m
bench.vector_state`` shows which library leaves what: bench/README.md, "ISA-L in the workers").
"""

from __future__ import annotations

import itertools
import zlib
from typing import Any, Callable, Iterable, Iterator, Sequence

import msgpack

from tracebus.engine.errors import DecodeError

try:
    from deflate import zlib_compress as _deflate
except ImportError:  # pragma: no cover - depends on the installation
    _deflate = zlib.compress
_inflate = zlib.decompress  # not ISA-L's: see the module docstring

#: Header byte of a plain msgpack value.
PLAIN = 0
#: Header byte of a zlib-compressed msgpack value.
ZLIB = 1
#: Compress by default (measurements in the module docstring).
DEFAULT_COMPRESS = True
#: Below this many bytes compression is not attempted.
MIN_COMPRESS_BYTES = 512
#: zlib level: 1 is several times faster than the default 6 for a few percent of size.
ZLIB_LEVEL = 1


def encode_chunk(columns: Sequence[str], rows: Sequence[Sequence],
                 compress: bool = DEFAULT_COMPRESS) -> bytes:
    """Encode one chunk of rows for storage.

    Args:
        columns(Sequence[str]): column names, in row order.
        rows(Sequence[Sequence]): rows as sequences of str/int/float/None.
        compress(bool): try zlib and keep it when it saves >= 10%.

    Returns:
        bytes: header byte followed by the payload.
    """
    raw = msgpack.packb({"columns": list(columns), "rows": rows}, use_bin_type=True)
    if compress and len(raw) >= MIN_COMPRESS_BYTES:
        packed = _deflate(raw, ZLIB_LEVEL)
        if len(packed) * 10 <= len(raw) * 9:
            return bytes((ZLIB,)) + packed
    return bytes((PLAIN,)) + raw


def decode_chunk(data: bytes) -> tuple[list[str], list[list]]:
    """Decode a value written by :func:`encode_chunk`.

    Returns:
        tuple[list[str], list[list]]: the column names and the rows.

    Raises:
        DecodeError: unknown header or corrupt payload.
    """
    return _decoded(data, lambda value: (value["columns"], value["rows"]), raw=False, use_list=True)


def decode_raw(data: bytes) -> tuple[list[str], list[tuple]]:
    """A value written by :func:`encode_chunk` as :func:`decode_chunk` gives it, but with every
    text cell as its UTF-8 bytes and every row a tuple: a third of the time of :func:`decode_chunk`
    (no text decoded into Python strings, no lists: 3.6 ms instead of 10-15 ms to unpack a
    5,000-row history chunk), for a reader that hands the rows to a C converter
    (:func:`tracebus.jobs.typed.raw_batch`). Binary cells are bytes too: they cannot be told from text.

    Raises:
        DecodeError: unknown header or corrupt payload.
    """
    return _decoded(data, lambda value: ([c.decode() for c in value[b"columns"]], value[b"rows"]),
                    raw=True, use_list=False)


def _decoded(data: bytes, pick: Callable[[Any], tuple], **unpack) -> tuple:
    """``pick`` of the msgpack value (``msgpack.unpackb(..., **unpack)``) in a value written by
    :func:`encode_chunk`: its header read, its body inflated when it is compressed.

    Raises:
        DecodeError: unknown header or corrupt payload (whatever zlib, msgpack, UTF-8 or ``pick``
            raised: they raise unrelated types).
    """
    try:
        header, body = data[0], memoryview(data)[1:]
        if header == ZLIB:
            body = _inflate(body)
        elif header != PLAIN:
            raise ValueError(f"unknown chunk header {header:#x}")
        return pick(msgpack.unpackb(body, **unpack))
    except Exception as e:
        raise DecodeError(f"undecodable result chunk: {e}", data=bytes(data[:64]), error=e) from None


#: Bytes of a stored chunk given to its decoder at a time (:func:`pieces_of`).
PIECE_BYTES = 16 << 10
#: Bytes of decoded msgpack a streamed chunk's decoder holds ahead of the row it gives (its
#: buffer, then zlib's window, 32 KB, are what a reader holds per chunk it has open).
FEED_BYTES = 8 << 10


#: What msgpack and zlib raise on a corrupt streamed chunk (they raise unrelated types).
_MALFORMED = (ValueError, zlib.error, msgpack.UnpackException)


def stream_chunk(pieces: Iterable[bytes]) -> tuple[list[str], Iterator[list]]:
    """The columns and rows of one value written by :func:`encode_chunk`, given as consecutive
    pieces of its bytes (:func:`pieces_of` cuts a value held whole) and decoded as they arrive:
    a reader holds a piece, zlib's window and a row, never the whole chunk decoded (a 5,000-row
    chunk decoded at once is several megabytes of Python objects). The columns are read at once;
    the rows as the iterator is consumed.

    Raises:
        DecodeError: unknown header, corrupt or truncated payload (the rows' errors while they
            are iterated).
    """
    pieces = iter(pieces)
    first = next(pieces, b"")
    if not first or first[0] not in (PLAIN, ZLIB):
        raise DecodeError("undecodable result chunk: empty or unknown header", data=bytes(first[:64]))
    feed = _Feed(first, pieces)
    try:
        feed.take(feed.unpacker.read_map_header)
        if feed.take(feed.unpacker.unpack) != "columns":
            raise ValueError("a chunk starts with its columns")
        columns = feed.take(feed.unpacker.unpack)
    except _MALFORMED as e:
        raise DecodeError(f"undecodable result chunk: {e}", error=e) from None
    return columns, _streamed_rows(feed)


def _streamed_rows(feed: "_Feed") -> Iterator[list]:
    """The rows of the chunk ``feed`` decodes, its columns already read (:func:`stream_chunk`)."""
    take, unpack = feed.take, feed.unpacker.unpack
    try:
        if take(unpack) != "rows":
            raise ValueError("a chunk's rows follow its columns")
        for _ in range(take(feed.unpacker.read_array_header)):
            yield take(unpack)
    except _MALFORMED as e:
        raise DecodeError(f"undecodable result chunk: {e}", error=e) from None


class _Feed:
    """The msgpack decoder of one streamed chunk, fed its pieces (inflated when the chunk is
    compressed) only when it runs out of data.

    Args:
        first: the chunk's first piece, its header byte included.
        pieces: the pieces after it.
    """

    __slots__ = ("_inflate", "_pending", "_pieces", "unpacker")

    def __init__(self, first: bytes, pieces: Iterator[bytes]):
        self._pieces = pieces
        self._pending = [memoryview(first)[1:]]
        self._inflate = zlib.decompressobj() if first[0] == ZLIB else None
        # The unpacker's buffer starts at read_size (1 MiB by default) and grows only to hold a row.
        self.unpacker = msgpack.Unpacker(raw=False, use_list=True, read_size=FEED_BYTES)

    def take(self, read):
        """``read()`` (one of the unpacker's reads), fed more of the chunk until it has the data.

        Raises:
            DecodeError: the chunk ended first (truncated).
        """
        while True:
            try:
                return read()
            except msgpack.OutOfData:
                data = self._more()
                if data is None:
                    raise DecodeError("undecodable result chunk: truncated") from None
                self.unpacker.feed(data)

    def _more(self) -> bytes | None:
        """The next decoded msgpack bytes (at most :data:`FEED_BYTES` inflated at a time); None
        at the chunk's end."""
        inflate = self._inflate
        if inflate is not None and inflate.unconsumed_tail:
            return inflate.decompress(inflate.unconsumed_tail, FEED_BYTES)
        piece = self._pending.pop() if self._pending else next(self._pieces, None)
        if piece is None:  # zlib may still hold output of the input it took
            return (inflate.flush() or None) if inflate is not None else None
        return inflate.decompress(piece, FEED_BYTES) if inflate is not None else piece


def stream_rows(pieces: Iterable[bytes]) -> Iterator[list]:
    """The rows of :func:`stream_chunk`, the columns read first when the rows are asked for."""
    yield from stream_chunk(pieces)[1]



def pieces_of(data: bytes, size: int = PIECE_BYTES) -> Iterator[memoryview]:
    """``data`` in consecutive slices of ``size`` bytes (views, no copies)."""
    view = memoryview(data)
    return (view[at:at + size] for at in range(0, len(view), size))


def decode_slices(data: bytes, rows_per_slice: int) -> tuple[list[str], Iterator[list[list]]]:
    """The columns of a value written by :func:`encode_chunk`, and its rows ``rows_per_slice``
    at a time, decoded as they are read (:func:`stream_chunk`): a stream whose client stops
    reading holds the stored bytes and one slice, not the chunk's rows as objects.

    Raises:
        DecodeError: unknown header or corrupt payload (also while the slices are read).
    """
    columns, rows = stream_chunk(pieces_of(data))

    def slices() -> Iterator[list[list]]:
        while batch := list(itertools.islice(rows, rows_per_slice)):
            yield batch

    return columns, slices()
