"""One section of a job's result as Parquet, Arrow or CSV, written from the stored chunks as they are read.

``GET /api/v1/jobs/{id}/export`` and ``tracebus fetch --format parquet|arrow`` hand a result to
data tools (pandas, polars, DuckDB) in their own formats instead of JSON. Each stored chunk is
read, turned into one Parquet row group or one Arrow IPC stream message and yielded before the
next chunk is read, so memory is bounded by a chunk, not by the result; the Parquet footer goes
last.

Most chunks are not converted here at all: a worker stores, next to each chunk whose columns
all have a type, a columnar copy (one-row-group Parquet, :mod:`tracebus.jobs.columnar`). The
Parquet export stitches those files (:mod:`tracebus.jobs.parquet_stitch`: their column-chunk
bytes pass through, only the footer's offsets move); the Arrow export reads them with pyarrow's
C++ reader. A chunk without a copy (a worker without pyarrow, ``TRACEBUS_COLUMNAR_COPY=0``, a
section without a type map, an older job) is decoded from msgpack and converted here, with the
same options, so the file is the same either way and a section may mix both.

Columns are typed by a map column -> type name (:data:`TYPES`; the rules are in
:mod:`tracebus.jobs.typed`); the application supplies it (the trace domains' is
:mod:`tracebus.trace.coltypes`). pyarrow is optional (``pip install 'tracebus[arrow]'``):
without it Parquet and Arrow raise :class:`FormatUnavailable`, CSV (the standard library's
writer) always works. It is imported by the first Parquet or Arrow export of a process (about
1-2 s and 100 MB of library once), not when the API starts: a slower worker boot made clients
time out.
"""

from __future__ import annotations

import csv
import io
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from tracebus.jobs import columnar, typed
from tracebus.jobs.chunkcodec import decode_chunk, decode_raw, decode_slices
from tracebus.jobs.csvcells import neutral_row
from tracebus.jobs.errors import JobError
from tracebus.jobs.parquet_stitch import NotParquet, Stitcher

#: Formats, and the media type of each.
CONTENT_TYPES = {"parquet": "application/vnd.apache.parquet",
                 "arrow": "application/vnd.apache.arrow.stream",
                 "csv": "text/csv; charset=utf-8"}
FORMATS = tuple(CONTENT_TYPES)
#: The column types a map may name.
TYPES = typed.TYPES


class FormatUnavailable(JobError):
    """The format needs pyarrow, which is not installed here."""

    code = "FORMAT_UNAVAILABLE"


class ExportError(JobError):
    """A chunk that cannot join the export (its columns differ from the first chunk's)."""

    code = "EXPORT_FAILED"


def _pyarrow():
    pa = typed.load()
    if pa is None:
        raise FormatUnavailable("Parquet and Arrow exports need pyarrow on the server: "
                                "pip install 'tracebus[arrow]' (CSV needs nothing)")
    return pa


def check_format(fmt: str) -> None:
    """Raises FormatUnavailable when ``fmt`` needs pyarrow and it is missing (before any byte)."""
    if fmt != "csv":
        _pyarrow()


def write(parts: Iterable, fmt: str, types: Mapping[str, str], columns: Sequence[str] = (),
          load: Callable[[object], bytes] | None = None) -> Iterator[bytes]:
    """The bytes of the export of ``parts`` in ``fmt``.

    Args:
        parts: the section's chunks in order (read lazily), each with ``rows``, ``value`` (the
            msgpack chunk, or None) and ``copy`` (its columnar copy, or None):
            :class:`tracebus.jobs.feed.Part`.
        fmt(str): one of :data:`FORMATS`.
        types(Mapping[str, str]): column -> one of :data:`TYPES`.
        columns(Sequence[str]): the columns of an empty result (its schema), when known.
        load: the msgpack chunk of a part whose ``value`` was not read (its copy could not be
            used); None: every part has its value.

    Raises:
        FormatUnavailable: Parquet or Arrow without pyarrow.
    """
    value = load or (lambda part: part.value)
    if fmt == "csv":
        return _csv(_csv_slices(parts, value), columns)
    pa = _pyarrow()
    if fmt == "parquet":
        return _parquet(pa, parts, value, types, columns)
    return _arrow(pa, parts, value, types, columns)


def arrow_type(pa, name: str):
    return typed.arrow_type(pa, name)


def _parquet(pa, parts, value, types: Mapping[str, str], columns: Sequence[str]) -> Iterator[bytes]:
    # Each row group is made in a call of its own: the chunk's rows and arrays are gone before
    # the bytes are yielded, so a client that stops reading pins the row group, not them.
    stitcher, state = Stitcher(), {"schema": None}
    for part in parts:
        if part.rows:
            yield _parquet_group(pa, stitcher, state, part, value, types, columns)
    if not stitcher.started:  # no row at all: a valid empty file of the known columns
        yield typed.parquet_file(pa, typed.declared_schema(pa, columns, types).empty_table())
        return
    yield stitcher.finish()


def _parquet_group(pa, stitcher, state: dict, part, value, types: Mapping[str, str], columns: Sequence[str]) -> bytes:
    """The bytes of ``part``'s row group in the file ``stitcher`` makes (its schema in ``state``)."""
    decoded = None
    if state["schema"] is None:
        # The file's schema: the section's own columns when ``types`` names them all, else the
        # first chunk's (its copy's columns, or its rows as the exports always inferred them).
        schema = _declared(pa, columns, types) or (part.copy is not None and _copy_schema(pa, part.copy, types))
        if not schema:
            decoded = decode_chunk(value(part))
            schema = typed.schema(pa, *decoded, types)
        state["schema"] = schema
        stitcher.expect(typed.parquet_file(pa, schema.empty_table()))
    out = None
    if part.copy is not None:
        try:
            data, located = columnar.decode(part.copy)
            out = stitcher.add(data, located)
        except (ValueError, NotParquet):
            out = None
    if out is None:  # no copy, or one of another schema: the chunk's rows converted into the file's
        batch = typed.batch(pa, state["schema"], *decoded) if decoded else _chunk_batch(pa, state["schema"], value(part))
        out = stitcher.add(typed.parquet_file(pa, batch))
        if out is None:
            raise ExportError("a chunk could not be written in the file's schema; the export stops")
    return out


def _chunk_batch(pa, schema, data):
    """The stored chunk ``data`` as a record batch in ``schema``: converted by pyarrow from its raw
    rows when they allow it (:func:`tracebus.jobs.typed.raw_batch`), else cell by cell."""
    batch = typed.raw_batch(pa, schema, *decode_raw(data))
    return batch if batch is not None else typed.batch(pa, schema, *decode_chunk(data))


def _declared(pa, columns: Sequence[str], types: Mapping[str, str]):
    """The schema of ``columns`` when ``types`` names every one, else None."""
    return typed.declared_schema(pa, columns, types) if columns and columnar.covers(columns, types) else None


def _copy_batches(pa, copy, schema):
    """The record batches of a columnar copy in ``schema`` (None when it does not fit)."""
    try:
        data, _ = columnar.decode(copy)
        # read in this thread (pyarrow's pool hands a 90 KB file to other threads for nothing: 4.4 ms
        # CPU a history chunk with it, 2.6-3.2 ms without), cast only when its types differ
        table = pa.parquet.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
        if schema is not None:
            if table.schema.names != schema.names:
                return None
            if not table.schema.equals(schema):
                table = table.cast(schema)
        return table.combine_chunks().to_batches()
    except (ValueError, pa.ArrowException):
        return None


#: Bytes of the Arrow export handed to the server at a time. A stored chunk is one record batch
#: (~0.9 MB of IPC for 5,000 history rows), serialized into one Arrow buffer and sent in pieces
#: of this size: a client that stops reading pins that buffer and a piece (and the server's copy
#: of it), not the batch as Python bytes copied twice (2.7 MB per unread stream, issue 39).
ARROW_PIECE_BYTES = 64 << 10
#: The end of an Arrow IPC stream (a continuation marker and a zero length).
ARROW_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _arrow(pa, parts, value, types: Mapping[str, str], columns: Sequence[str]) -> Iterator[bytes]:
    # The stream's messages written one by one (the bytes pyarrow's stream writer makes): the
    # schema, a record batch per chunk, the end marker.
    state = {"schema": _declared(pa, columns, types), "started": False}
    for part in parts:
        if part.rows:
            # made in a call of its own: the chunk's rows and arrays are gone before the bytes go out
            for message in _arrow_messages(pa, state, part, value, types):
                yield from _pieces(message)
    if not state["started"]:  # no row at all: a valid empty stream of the known columns
        yield (state["schema"] or typed.declared_schema(pa, columns, types)).serialize().to_pybytes()
    yield ARROW_EOS


def _pieces(buffer) -> Iterator[bytes]:
    """``buffer`` (an Arrow buffer) as bytes, :data:`ARROW_PIECE_BYTES` at a time."""
    for at in range(0, buffer.size, ARROW_PIECE_BYTES):
        yield buffer.slice(at, min(ARROW_PIECE_BYTES, buffer.size - at)).to_pybytes()


def _arrow_messages(pa, state: dict, part, value, types: Mapping[str, str]) -> list:
    """The IPC messages (Arrow buffers) of ``part``: the stream's schema first when it is the
    first chunk, then its record batches (the schema and whether it went out in ``state``)."""
    schema, batches = state["schema"], None
    if part.copy is not None:
        first = schema or _copy_schema(pa, part.copy, types)
        batches = first and _copy_batches(pa, part.copy, first)
        if batches:
            schema = first
    if not batches and schema is None:  # a section without a full type map: typed by its first chunk
        cols, rows = decode_chunk(value(part))
        schema = typed.schema(pa, cols, rows, types)
        batches = [typed.batch(pa, schema, cols, rows)]
    elif not batches:
        batches = [_chunk_batch(pa, schema, value(part))]
    state["schema"] = schema
    messages = [] if state["started"] else [schema.serialize()]
    state["started"] = True
    return messages + [batch.serialize() for batch in batches]


def _copy_schema(pa, copy, types: Mapping[str, str]):
    """The export's schema for a section whose first chunk has a copy: its columns, typed by ``types``."""
    try:
        data, _ = columnar.decode(copy)
        names = pa.parquet.read_schema(pa.BufferReader(data)).names
    except (ValueError, pa.ArrowException):
        return None
    return typed.declared_schema(pa, names, types) if columnar.covers(names, types) else None


#: Rows per piece of the CSV export (~100 KB of history): a client that stops reading pins one
#: piece and the stored chunk, not the chunk's rows as objects (issue 39).
CSV_SLICE_ROWS = 64


def _csv_slices(parts, value) -> Iterator[tuple[list[str], list[list]]]:
    """(columns, rows) of every stored chunk of ``parts``, :data:`CSV_SLICE_ROWS` rows at a time."""
    for part in parts:
        if part.rows:
            cols, slices = decode_slices(value(part), CSV_SLICE_ROWS)
            for rows in slices:
                yield cols, rows


def _csv(chunks, columns: Sequence[str]) -> Iterator[bytes]:
    """RFC 4180 CSV, header first; nulls are empty cells; text that would start a formula
    is neutralised (:mod:`tracebus.jobs.csvcells`). ``chunks``: (columns, rows) pairs."""
    header = False
    for cols, rows in chunks:
        out = io.StringIO()  # a new one per piece: a truncated one keeps its buffer (4 bytes a character)
        writer = csv.writer(out, lineterminator="\r\n")
        if not header:
            writer.writerow(neutral_row(cols))
            header = True
        writer.writerows(map(neutral_row, rows))
        del rows
        piece = out.getvalue().encode("utf-8")
        del out, writer
        yield piece
    if not header:
        out = io.StringIO()
        csv.writer(out, lineterminator="\r\n").writerow(neutral_row(columns))
        yield out.getvalue().encode("utf-8")
