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

A reader that sends a chunk on (the API's NDJSON and CSV streams) reads it in slices of rows
(:func:`decode_slices`): the chunk is inflated and unpacked a few tens of KB at a time, so a
stream whose client stops reading holds the stored bytes and one slice, not the chunk's rows
as Python objects (several MB at 5,000 rows).
"""

from __future__ import annotations

import zlib
from typing import Iterator, Sequence

import msgpack

from tracebus.engine.errors import DecodeError

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
        packed = zlib.compress(raw, ZLIB_LEVEL)
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
    try:
        header, body = data[0], memoryview(data)[1:]
        if header == ZLIB:
            body = zlib.decompress(body)
        elif header != PLAIN:
            raise ValueError(f"unknown chunk header {header:#x}")
        value = msgpack.unpackb(body, raw=False, use_list=True)
        return value["columns"], value["rows"]
    except Exception as e:  # zlib, msgpack and indexing raise unrelated types
        raise DecodeError(f"undecodable result chunk: {e}", data=bytes(data[:64]), error=e) from None


#: Decompressed bytes read per step by :func:`decode_slices`.
_STEP = 64 * 1024


class _Reader:
    """A file-like view of a chunk's msgpack payload, inflated ``n`` bytes at a time."""

    def __init__(self, header: int, body: memoryview):
        self._inflate = zlib.decompressobj() if header == ZLIB else None
        self._body, self._at = body, 0

    def read(self, n: int) -> bytes:
        if self._inflate is None:
            out = self._body[self._at:self._at + n]
            self._at += len(out)
            return bytes(out)
        if self._body is None:
            return b""
        out = self._inflate.decompress(self._body, n)
        self._body = self._inflate.unconsumed_tail
        if not self._body:  # all input taken: what zlib still holds, then the end
            out += self._inflate.flush()
            self._body = None
        return out


def decode_slices(data: bytes, rows_per_slice: int) -> tuple[list[str], int, Iterator[list[list]]]:
    """Decode a value written by :func:`encode_chunk` lazily: its columns and row count now,
    its rows ``rows_per_slice`` at a time as the iterator is read.

    Returns:
        tuple[list[str], int, Iterator[list[list]]]: the column names, the number of rows and
        the rows in slices (their concatenation is :func:`decode_chunk`'s rows).

    Raises:
        DecodeError: unknown header or corrupt payload (also while the slices are read).
    """
    try:
        header = data[0]
        if header not in (PLAIN, ZLIB):
            raise ValueError(f"unknown chunk header {header:#x}")
        unpacker = msgpack.Unpacker(_Reader(header, memoryview(data)[1:]), raw=False, use_list=True,
                                    read_size=_STEP)
        columns = None
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "columns":
                columns = unpacker.unpack()
            elif key == "rows" and columns is not None:
                count = unpacker.read_array_header()
                return columns, count, _slices(unpacker, count, rows_per_slice, data)
            else:  # not the order encode_chunk writes: decode it whole
                break
    except Exception as e:  # zlib, msgpack and indexing raise unrelated types
        raise DecodeError(f"undecodable result chunk: {e}", data=bytes(data[:64]), error=e) from None
    columns, rows = decode_chunk(data)
    return columns, len(rows), (rows[i:i + rows_per_slice] for i in range(0, len(rows), rows_per_slice))


def _slices(unpacker, count: int, size: int, data: bytes) -> Iterator[list[list]]:
    try:
        for start in range(0, count, size):
            yield [unpacker.unpack() for _ in range(min(size, count - start))]
    except Exception as e:  # noqa: BLE001 - as decode_chunk: one error type for a bad chunk
        raise DecodeError(f"undecodable result chunk: {e}", data=bytes(data[:64]), error=e) from None
