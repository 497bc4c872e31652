"""The binary wire format of a result stream (``application/vnd.msgpack``), both sides.

A body is a plain sequence of msgpack maps, one after another with nothing in between
(any streaming msgpack decoder splits it). Every map has a ``type``; a map that carries
rows has, last, ``chunk``: a msgpack *bin* holding one stored result chunk exactly as the
job wrote it to Redis (:mod:`tracebus.jobs.chunkcodec`): byte 0 is ``0x00`` (the rest is
msgpack) or ``0x01`` (the rest is zlib-compressed msgpack), and the msgpack is
``{"columns": [...], "rows": [[...], ...]}``. The server forwards stored bytes without
decoding them; :func:`expand` turns such a map into the form the NDJSON stream shows
(``data``: one object per row, in place of ``chunk``).

Writing: :func:`frame` for a map without rows, :func:`chunk_head` for the bytes before a
stored chunk (the caller sends the chunk right after). Reading: :class:`FrameReader`.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator

import msgpack

from tracebus.jobs.chunkcodec import decode_chunk

#: Content type of the binary stream.
CONTENT_TYPE = "application/vnd.msgpack"
#: Largest frame a reader accepts (a stored chunk is well under 10 MB).
MAX_FRAME_BYTES = 256 * 1024 * 1024


def frame(kind: str, **fields) -> bytes:
    """One map ``{"type": kind, **fields}``."""
    return msgpack.packb({"type": kind, **fields}, use_bin_type=True)


def chunk_head(kind: str, size: int, **fields) -> bytes:
    """The bytes of ``{"type": kind, **fields, "chunk": <bin of size bytes>}`` up to the bin's
    payload: the caller sends the stored chunk (``size`` bytes) right after it."""
    packer = msgpack.Packer(use_bin_type=True)
    head = [packer.pack_map_header(len(fields) + 2), packer.pack("type"), packer.pack(kind)]
    for name, value in fields.items():
        head += [packer.pack(name), packer.pack(value)]
    head.append(packer.pack("chunk"))
    head.append(_bin_header(size))
    return b"".join(head)


def _bin_header(size: int) -> bytes:
    if size < 1 << 8:
        return struct.pack(">BB", 0xC4, size)
    if size < 1 << 16:
        return struct.pack(">BH", 0xC5, size)
    return struct.pack(">BI", 0xC6, size)


def rows_of(message: dict) -> tuple[list[str], list[list]]:
    """``(columns, rows)`` of a map that carries a ``chunk``.

    Raises:
        DecodeError: the chunk is corrupt.
    """
    return decode_chunk(message["chunk"])


def expand(message: dict) -> dict:
    """The map as the NDJSON stream shows it: ``chunk`` replaced by ``data``, a list of row
    objects (key order kept, so ``orjson.dumps`` of it gives the NDJSON line's bytes)."""
    if "chunk" not in message:
        return message
    columns, rows = rows_of(message)
    out = {k: v for k, v in message.items() if k != "chunk"}
    out["data"] = [dict(zip(columns, row)) for row in rows]
    return out


class FrameReader:
    """Splits a binary result stream into its maps, whatever the sizes of the blocks read.

    Usage::

        reader = FrameReader()
        for block in response_blocks:
            for message in reader.feed(block):
                ...
        reader.close()   # raises if the body ended inside a map
    """

    def __init__(self):
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_FRAME_BYTES)
        self._fed = 0

    def feed(self, block: bytes) -> Iterator[dict]:
        """Maps completed by ``block``."""
        self._unpacker.feed(block)
        self._fed += len(block)
        yield from self._unpacker

    def close(self) -> None:
        """Check the body did not end inside a map.

        Raises:
            ValueError: trailing bytes that are not a whole map.
        """
        if self._unpacker.tell() != self._fed:
            raise ValueError(f"the stream ended inside a message ({self._fed - self._unpacker.tell()} bytes left)")


def read(blocks: Iterable[bytes]) -> Iterator[dict]:
    """Every map of a binary result stream read as ``blocks``.

    Raises:
        ValueError: the stream ended inside a map.
    """
    reader = FrameReader()
    for block in blocks:
        yield from reader.feed(block)
    reader.close()
