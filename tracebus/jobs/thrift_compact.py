"""A small reader and writer of Thrift's compact protocol, for Parquet footers.

Parquet's footer (``FileMetaData``) is a Thrift struct in the compact protocol. Stitching
one-row-group Parquet files into one (:mod:`tracebus.jobs.parquet_stitch`) has to read each
file's row group, move its byte offsets and write one footer with them all. pyarrow reads a
footer (``FileMetaData``, ``append_row_groups``) but can neither change an offset nor write a
row group out, and the Thrift libraries that can (thrift, thriftpy2) need parquet.thrift's
IDL and drop the fields their copy of it does not know. This codec needs no IDL: a struct is
read as ``{field id: (type, value)}`` in the order its fields came, and a field left out of
the ``spec`` of what to decode is kept as its raw bytes and written back unchanged, so
whatever a newer writer adds passes through.

Wire format (Thrift's compact protocol): a field header is one byte, the id delta in the high
nibble and the type in the low one (delta 0: a zigzag varint i16 id follows); integers are
zigzag varints, doubles 8 bytes little-endian, binaries a varint length and the bytes, lists
a header byte (size in the high nibble, 15: a varint size follows; element type in the low
one), structs end with a 0 byte, booleans in fields live in the header's type (1 true, 2 false).
"""

from __future__ import annotations

import struct as _struct
from typing import Mapping

# Compact protocol type ids.
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
_INTS = (BYTE, I16, I32, I64)


class ThriftError(ValueError):
    """Bytes that are not a compact-protocol struct (truncated, unknown type)."""


class Raw(bytes):
    """A field value kept as its encoded bytes (written back as they are)."""


def _varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise ThriftError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ThriftError("varint too long")


def _unzig(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _zig(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _put_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _skip(buf, pos: int, kind: int) -> int:
    """The position after one value of ``kind`` at ``pos`` (the hot path of reading a footer:
    the integers, binaries and structs a footer is made of are walked inline, the rarer types
    in :func:`_skip_other`)."""
    if kind in (I16, I32, I64):
        while buf[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == BINARY:
        n = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return pos + n
            shift += 7
    if kind == STRUCT:
        return _skip_struct(buf, pos)
    return _skip_other(buf, pos, kind)


def _skip_struct(buf, pos: int) -> int:
    """The position after the struct at ``pos`` (its fields skipped one by one)."""
    while True:
        head = buf[pos]
        pos += 1
        ftype = head & 0x0F
        if ftype == 0:
            return pos
        if not head >> 4:  # a long field id: skip its varint
            while buf[pos] & 0x80:
                pos += 1
            pos += 1
        if ftype in (I16, I32, I64):  # most of a footer's fields: walked here, without a call
            while buf[pos] & 0x80:
                pos += 1
            pos += 1
        elif ftype not in (TRUE, FALSE):  # a field's boolean is in its header
            pos = _skip(buf, pos, ftype)


def _skip_other(buf, pos: int, kind: int) -> int:
    """:func:`_skip` for the types a footer rarely holds (booleans, bytes, doubles, lists,
    sets, maps)."""
    if kind in (TRUE, FALSE):
        return pos  # a field's boolean is in its header (a list's booleans are read as bytes)
    if kind == BYTE:
        return pos + 1
    if kind == DOUBLE:
        return pos + 8
    if kind in (LIST, SET):
        return _skip_list(buf, pos)
    if kind == MAP:
        return _skip_map(buf, pos)
    raise ThriftError(f"unknown compact type {kind}")


def _skip_list(buf, pos: int) -> int:
    size, elem, pos = _list_header(buf, pos)
    if elem in (TRUE, FALSE, BYTE):
        return pos + size
    if elem == DOUBLE:
        return pos + 8 * size
    for _ in range(size):
        pos = _skip(buf, pos, elem)
    return pos


def _skip_map(buf, pos: int) -> int:
    size, pos = _varint(buf, pos)
    if size:
        types = buf[pos]
        pos += 1
        for _ in range(size):
            pos = _skip(buf, pos, types >> 4)
            pos = _skip(buf, pos, types & 0x0F)
    return pos


def _list_header(buf, pos: int) -> tuple[int, int, int]:
    try:
        head = buf[pos]
    except IndexError:
        raise ThriftError("truncated list") from None
    pos += 1
    size = head >> 4
    if size == 15:
        size, pos = _varint(buf, pos)
    return size, head & 0x0F, pos


def _field_header(buf, pos: int, last: int) -> tuple[int, int, int]:
    try:
        head = buf[pos]
    except IndexError:
        raise ThriftError("truncated struct") from None
    pos += 1
    kind = head & 0x0F
    if kind == 0:
        return 0, 0, pos
    delta = head >> 4
    if delta:
        return last + delta, kind, pos
    fid, pos = _varint(buf, pos)
    return _unzig(fid), kind, pos


def read_struct(buf, pos: int = 0, spec: Mapping | None = None, last: int = 0,
                until: int | None = None) -> tuple[dict, int]:
    """Read one struct at ``pos``.

    Args:
        buf: bytes-like.
        spec: field id -> what to decode of it: ``True`` (a scalar, or a value kept whole), a
            nested spec (a struct, or a list of structs, decoded with it); a field not named
            is kept as :class:`Raw`. None decodes every field.
        last: the id of the field before ``pos`` (to resume in the middle of a struct).
        until: stop right after the field with this id or a higher one (the rest unread).

    Returns:
        ({field id: (type, value)}, position after the struct, or after the field ``until``
        stopped at). A list value is ``(element type, [values])``; a decoded struct a dict like
        this one.

    Raises:
        ThriftError: the bytes end early or hold an unknown type.
    """
    try:
        return _read_fields(buf, pos, spec, last, until)
    except IndexError:
        raise ThriftError("truncated struct") from None


def _read_fields(buf, pos: int, spec, last: int = 0, until: int | None = None) -> tuple[dict, int]:
    fields: dict = {}
    while True:
        fid, kind, pos = _field_header(buf, pos, last)
        if kind == 0:
            return fields, pos
        last = fid
        want = True if spec is None else spec.get(fid)
        if want is None:
            end = _skip(buf, pos, kind)
            fields[fid] = (kind, Raw(buf[pos:end]))
            pos = end
        else:
            value, pos = _read_value(buf, pos, kind, None if want is True else want)
            fields[fid] = (kind, value)
        if until is not None and fid >= until:
            return fields, pos


def _read_value(buf, pos: int, kind: int, spec):
    if kind in (I16, I32, I64):
        n, pos = _varint(buf, pos)
        return _unzig(n), pos
    if kind in (TRUE, FALSE):
        return kind == TRUE, pos
    if kind == BYTE:
        b = buf[pos]
        return (b - 256 if b > 127 else b), pos + 1
    if kind == DOUBLE:
        return _struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == BINARY:
        n, pos = _varint(buf, pos)
        if pos + n > len(buf):
            raise ThriftError("truncated binary")
        return bytes(buf[pos:pos + n]), pos + n
    if kind in (LIST, SET):
        return _read_list(buf, pos, spec)
    if kind == STRUCT:
        return _read_fields(buf, pos, spec)
    if kind == MAP:
        end = _skip(buf, pos, kind)
        return Raw(buf[pos:end]), end
    raise ThriftError(f"unknown compact type {kind}")


def _read_list(buf, pos: int, spec) -> tuple[tuple[int, list], int]:
    """((element type, [values]), position after the list); a list's booleans are bytes."""
    size, elem, pos = _list_header(buf, pos)
    if elem in (TRUE, FALSE):
        return (elem, [b == TRUE for b in buf[pos:pos + size]]), pos + size
    values = []
    for _ in range(size):
        value, pos = _read_value(buf, pos, elem, spec)
        values.append(value)
    return (elem, values), pos


def write_struct(fields: Mapping, out: bytearray | None = None) -> bytearray:
    """Append the struct ``fields`` (as :func:`read_struct` gives them) to ``out``; fields in
    ascending id order, as every Thrift writer sends them."""
    out = bytearray() if out is None else out
    last = 0
    for fid in sorted(fields):
        kind, value = fields[fid]
        if kind in (TRUE, FALSE) and not isinstance(value, Raw):
            kind = TRUE if value else FALSE
        write_field_header(out, fid, kind, last)
        last = fid
        _write_value(out, kind, value)
    out.append(0)
    return out


def _write_value(out: bytearray, kind: int, value) -> None:
    if isinstance(value, Raw):
        out += value
    elif kind in (TRUE, FALSE):
        pass
    elif kind == BYTE:
        out.append(value & 0xFF)
    elif kind in (I16, I32, I64):
        _put_varint(out, _zig(value))
    elif kind == DOUBLE:
        out += _struct.pack("<d", value)
    elif kind == BINARY:
        _put_varint(out, len(value))
        out += value
    elif kind in (LIST, SET):
        _write_list(out, *value)
    elif kind == STRUCT:
        write_struct(value, out)
    else:
        raise ThriftError(f"cannot write compact type {kind}")


def _write_list(out: bytearray, elem: int, values) -> None:
    """Append a list of ``values`` of type ``elem`` (its booleans as bytes)."""
    write_list_header(out, elem, len(values))
    if elem in (TRUE, FALSE):
        out += bytes(TRUE if v else FALSE for v in values)
    else:
        for v in values:
            _write_value(out, elem, v)


def write_list_header(out: bytearray, elem: int, size: int) -> None:
    """Append a list header of ``size`` elements of type ``elem``."""
    if size < 15:
        out.append((size << 4) | elem)
    else:
        out.append(0xF0 | elem)
        _put_varint(out, size)


def write_field_header(out: bytearray, fid: int, kind: int, last: int) -> None:
    """Append a field header (for writers that build a struct field by field)."""
    delta = fid - last
    if 0 < delta <= 15:
        out.append((delta << 4) | kind)
    else:
        out.append(kind)
        _put_varint(out, _zig(fid))


# Public names of the pieces, for walkers that track positions (tracebus.jobs.parquet_stitch).
def field_header(buf, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, position after the header); type 0 is the struct's end."""
    try:
        return _field_header(buf, pos, last)
    except IndexError:
        raise ThriftError("truncated struct") from None


def list_header(buf, pos: int) -> tuple[int, int, int]:
    """(size, element type, position after the header)."""
    return _list_header(buf, pos)


def skip(buf, pos: int, kind: int) -> int:
    """The position after one value of ``kind`` at ``pos``."""
    try:
        return _skip(buf, pos, kind)
    except IndexError:
        raise ThriftError("truncated value") from None


def read_value(buf, pos: int, kind: int):
    """(one value of ``kind`` at ``pos``, decoded whole; the position after it)."""
    try:
        return _read_value(buf, pos, kind, None)
    except IndexError:
        raise ThriftError("truncated value") from None


def put_varint(out: bytearray, n: int) -> None:
    """Append the varint of the non-negative ``n``."""
    _put_varint(out, n)


def zigzag(n: int) -> int:
    """The zigzag form of a signed integer (what an integer's varint holds)."""
    return _zig(n)
