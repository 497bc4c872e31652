"""Stitching one-row-group Parquet files into one Parquet file, without decoding a value.

A worker stores, next to each result chunk, the same rows as a Parquet file of one row group
(:mod:`tracebus.jobs.columnar`). The export of a section passes each such file's column-chunk
bytes through as they are and writes one footer for them all at the end:

    PAR1 | file 1's column chunks | file 2's ... | FileMetaData (every row group) | length | PAR1

A row group's metadata names absolute byte offsets (its data, dictionary and index pages, the
column chunk's start, the page indexes and bloom filters when written); each is moved by where
that file's bytes land in the output, and its ordinal becomes its place in the output. The
footer is Thrift compact (:mod:`tracebus.jobs.thrift_compact`). :func:`locate` walks a footer
once and notes where those numbers are (a :class:`Located`); :meth:`Stitcher.add` then only
rewrites the varints at those places and copies every other byte (statistics, encodings, the
``ARROW:schema`` key) as it was. A worker stores the :class:`Located` with its copy, so the API
walks no footer; a file made in the API is located there. Every file must have the first
one's schema (the same bytes of the footer's version and schema fields): :meth:`Stitcher.add`
refuses one that differs, and the caller converts that chunk itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tracebus.jobs import thrift_compact as tc

MAGIC = b"PAR1"
_SHIFT, _ORDINAL = "shift", "ordinal"
#: Where the numbers to rewrite are. RowGroup: columns (1), file_offset (5), ordinal (7);
#: ColumnChunk: file_offset (2), ColumnMetaData (3), offset and column index offsets (4, 6);
#: ColumnMetaData: data, index and dictionary page offsets (9, 10, 11), bloom filter offset (14).
_COLUMN_META = {9: _SHIFT, 10: _SHIFT, 11: _SHIFT, 14: _SHIFT}
_COLUMN_CHUNK = {2: _SHIFT, 3: _COLUMN_META, 4: _SHIFT, 6: _SHIFT}
_ROW_GROUP = {1: _COLUMN_CHUNK, 5: _SHIFT, 7: _ORDINAL}
#: Largest RowGroup.ordinal (an i16).
MAX_ROW_GROUPS = 2 ** 15


class NotParquet(ValueError):
    """Bytes that are not a whole Parquet file (bad magic, footer length or footer), or one
    this stitcher cannot take (not version and schema first)."""


@dataclass(frozen=True, slots=True)
class Located:
    """Where, in a Parquet file's footer (positions from the footer's first byte), the stitch
    rewrites numbers.

    Attributes:
        prefix(int): bytes of the version and schema fields (the first two): compared between files.
        rows(int): FileMetaData.num_rows.
        groups(tuple[int, int]): start and end of the row groups' structs (inside the list).
        count(int): row groups.
        shifts(tuple[int, ...]): positions of the offset varints, ascending.
        ordinals(tuple[int, ...]): position of each row group's ordinal varint (none when the
            writer left the optional ordinals out, as pyarrow does).
    """

    prefix: int
    rows: int
    groups: tuple[int, int]
    count: int
    shifts: tuple[int, ...]
    ordinals: tuple[int, ...]

    def pack(self) -> list:
        """As a list of ints and lists (msgpack-able)."""
        return [self.prefix, self.rows, list(self.groups), self.count, list(self.shifts), list(self.ordinals)]

    @classmethod
    def unpack(cls, value) -> "Located":
        prefix, rows, groups, count, shifts, ordinals = value
        return cls(prefix, rows, tuple(groups), count, tuple(shifts), tuple(ordinals))


def footer_span(data) -> tuple[int, int]:
    """(start, end) of the footer of the Parquet file ``data``; its column chunks end at start.

    Raises:
        NotParquet: bad magic or footer length.
    """
    n = len(data)
    if n < 12 or data[:4] != MAGIC or data[n - 4:] != MAGIC:
        raise NotParquet("not a Parquet file (magic)")
    (length,) = struct.unpack_from("<I", data, n - 8)
    start = n - 8 - length
    if start < 4:
        raise NotParquet("not a Parquet file (footer length)")
    return start, n - 8


def locate(data) -> Located:
    """Walk the footer of the Parquet file ``data`` once (see :class:`Located`).

    Raises:
        NotParquet: not a Parquet file this stitcher can take.
    """
    start, end = footer_span(data)
    meta = memoryview(data)[start:end]
    shifts: list[int] = []
    ordinals: list[int] = []
    rows, groups, count, prefix, seen = 0, (0, 0), 0, 0, []
    try:
        pos = last = 0
        while True:
            fid, kind, pos = tc.field_header(meta, pos, last)
            if kind == 0:
                break
            last = fid
            seen.append(fid)
            if fid == 3 and kind == tc.I64:
                rows, pos = tc.read_value(meta, pos, kind)
            elif fid == 4 and kind == tc.LIST:
                count, groups = _walk_row_groups(meta, pos, shifts, ordinals)
                pos = groups[1]
            else:
                pos = tc.skip(meta, pos, kind)
            if fid == 2:
                prefix = pos
    except tc.ThriftError as e:
        raise NotParquet(f"undecodable Parquet footer: {e}") from None
    if seen[:2] != [1, 2]:
        raise NotParquet("a Parquet footer without its version and schema first")
    return Located(prefix, rows, groups, count, tuple(shifts), tuple(ordinals))


def _walk_row_groups(meta, pos: int, shifts: list, ordinals: list) -> tuple[int, tuple[int, int]]:
    """Walk FileMetaData.row_groups, the list at ``pos``, noting its offsets and ordinals
    (see :func:`_walk`); (row groups, (start, end) of their structs)."""
    count, elem, pos = tc.list_header(meta, pos)
    if elem != tc.STRUCT:
        raise NotParquet("undecodable Parquet footer: row groups")
    first = pos
    for _ in range(count):
        pos = _walk(meta, pos, _ROW_GROUP, shifts, ordinals)
    if ordinals and len(ordinals) != count:
        raise NotParquet("Parquet row groups with and without an ordinal")
    return count, (first, pos)


def _walk(buf, pos: int, spec: dict, shifts: list, ordinals: list) -> int:
    """Skip one struct at ``pos``, noting where its (nested) :data:`_SHIFT` and :data:`_ORDINAL`
    integers are; the position after it."""
    last = 0
    while True:
        fid, kind, pos = tc.field_header(buf, pos, last)
        if kind == 0:
            return pos
        last = fid
        want = spec.get(fid)
        if want is None:
            pos = tc.skip(buf, pos, kind)
        elif want == _SHIFT and kind in (tc.I32, tc.I64):
            shifts.append(pos)
            pos = tc.skip(buf, pos, kind)
        elif want == _ORDINAL and kind == tc.I16:
            ordinals.append(pos)
            pos = tc.skip(buf, pos, kind)
        elif isinstance(want, dict) and kind == tc.STRUCT:
            pos = _walk(buf, pos, want, shifts, ordinals)
        elif isinstance(want, dict) and kind == tc.LIST:
            size, elem, pos = tc.list_header(buf, pos)
            if elem != tc.STRUCT:
                raise NotParquet(f"undecodable Parquet footer: field {fid}")
            for _ in range(size):
                pos = _walk(buf, pos, want, shifts, ordinals)
        else:
            raise NotParquet(f"undecodable Parquet footer: field {fid} of type {kind}")


class Stitcher:
    """Builds one Parquet file from whole Parquet files of the same schema, in order.

    :meth:`add` returns the bytes to send for a file (the magic first, the first time);
    :meth:`finish` the footer. Memory: the row groups' metadata (a few KB per file).
    """

    def __init__(self):
        self.position = 0
        self.rows = 0
        self.row_groups = 0
        self._groups = bytearray()
        self._head: dict | None = None
        self._prefix = b""

    def expect(self, data) -> None:
        """Take only files of the schema of the Parquet file ``data`` (say, an empty file of the
        schema the caller wants), the first one included."""
        start, end = footer_span(data)
        self._prefix = bytes(memoryview(data)[start:start + locate(data).prefix])

    @property
    def started(self) -> bool:
        """True once a file was added."""
        return self._head is not None

    def add(self, data, located: Located | None = None) -> bytes | None:
        """The bytes of ``data``'s column chunks, to be sent next; None (and nothing recorded)
        when its schema is not the first file's, or the output would pass
        :data:`MAX_ROW_GROUPS` row groups.

        Args:
            data: a whole Parquet file.
            located: its :func:`locate` (computed here when None).

        Raises:
            NotParquet: ``data`` is not a whole Parquet file this stitcher can take.
        """
        start, end = footer_span(data)
        loc = locate(data) if located is None else located
        meta = memoryview(data)[start:end]
        if self.row_groups + loc.count > MAX_ROW_GROUPS:
            return None
        if self._prefix and (loc.prefix != len(self._prefix) or meta[:loc.prefix] != self._prefix):
            return None
        if self._head is None:
            try:
                head, _ = tc.read_struct(meta, 0, {})
            except tc.ThriftError as e:
                raise NotParquet(f"undecodable Parquet footer: {e}") from None
            self._head = {fid: v for fid, v in head.items() if fid not in (3, 4)}
            self._prefix = bytes(meta[:loc.prefix])
        lead = b""
        if self.position == 0:
            lead, self.position = MAGIC, len(MAGIC)
        self._splice(meta, loc, self.position - len(MAGIC))
        self.row_groups += loc.count
        self.rows += loc.rows
        body = memoryview(data)[len(MAGIC):start]
        self.position += len(body)
        return lead + bytes(body) if lead else bytes(body)

    def _splice(self, meta, loc: Located, shift: int) -> None:
        """Append ``meta``'s row groups with each offset moved by ``shift`` and each ordinal
        renumbered, every other byte as it was."""
        out, copied = self._groups, loc.groups[0]
        edits = sorted([(p, True) for p in loc.shifts] + [(p, False) for p in loc.ordinals])
        ordinal = self.row_groups
        for pos, is_offset in edits:
            value, after = tc.read_value(meta, pos, tc.I64)
            if is_offset:
                value = value + shift if value > 0 else value  # 0: not known, left alone
            else:
                value, ordinal = ordinal, ordinal + 1
            out += meta[copied:pos]
            tc.put_varint(out, tc.zigzag(value))
            copied = after
        out += meta[copied:loc.groups[1]]

    def finish(self) -> bytes:
        """The footer (FileMetaData with every row group, its length, the magic)."""
        if self._head is None:
            raise ValueError("no Parquet file was added")
        fields = dict(self._head)
        fields[3] = (tc.I64, self.rows)
        groups = bytearray()
        tc.write_list_header(groups, tc.STRUCT, self.row_groups)
        groups += self._groups
        fields[4] = (tc.LIST, tc.Raw(groups))
        meta = tc.write_struct(fields)
        return bytes(meta) + struct.pack("<I", len(meta)) + MAGIC
