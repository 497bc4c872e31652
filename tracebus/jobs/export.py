"""One section of a job's result as Parquet, Arrow or CSV, written from the stored chunks as they are read.

``GET /api/v1/jobs/{id}/export`` and ``tracebus fetch --format parquet|arrow`` hand a result to
data tools (pandas, polars, DuckDB) in their own formats instead of JSON. Each stored chunk
is read (one GET), decoded and converted to one Arrow record batch, written (one Parquet row
group, or one Arrow IPC stream message) and yielded before the next chunk is read, so memory
is bounded by a chunk, not by the result; the Parquet footer goes last.

Columns are typed by a map column -> type name (:data:`TYPES`): ``string``, ``int64``,
``float64``, ``timestamp`` (seconds, no zone: the sources' ``YYYY-MM-DD HH:MM:SS`` text),
``date`` (``YYYY-MM-DD``) and ``bool``; a column the map does not name is typed from the first
chunk's values (text when they are all null). A value that is not of its column's type
(a text that is no timestamp, date or number; a fraction in an integer column) becomes null
rather than ending the stream; numeric text is read as its number. The application supplies the map (the trace
domains' is :mod:`tracebus.trace.coltypes`).

pyarrow is an optional dependency (``pip install 'tracebus[arrow]'``): without it Parquet and
Arrow raise :class:`FormatUnavailable`, CSV (the standard library's writer) always works. It is
imported by the first Parquet or Arrow export of a process (about 1-2 s and 100 MB of library
once), not when the API starts: a slower worker boot made clients time out.
"""

from __future__ import annotations

import csv
import io
from typing import Iterable, Iterator, Mapping, Sequence

from tracebus.jobs.csvcells import neutral_row
from tracebus.jobs.errors import JobError

#: Formats, and the media type of each.
CONTENT_TYPES = {"parquet": "application/vnd.apache.parquet",
                 "arrow": "application/vnd.apache.arrow.stream",
                 "csv": "text/csv; charset=utf-8"}
FORMATS = tuple(CONTENT_TYPES)
#: The column types a map may name.
TYPES = ("string", "int64", "float64", "timestamp", "date", "bool")
#: Parquet compression: zstd level 6 was smaller than snappy and zstd 1 and as fast, per 5,000-row
#: history chunk. Timestamps and integers are delta-encoded instead of dictionary-encoded: rows come
#: grouped by lot and in time order, so the deltas are small (history: 0.63x -> 0.50x the stored bytes).
PARQUET_COMPRESSION, PARQUET_LEVEL = "zstd", 6
#: Text formats of the timestamp and date columns (the sources' TO_CHAR / strftime output).
TIMESTAMP_FORMAT, DATE_FORMAT = "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"


class FormatUnavailable(JobError):
    """The format needs pyarrow, which is not installed here."""

    code = "FORMAT_UNAVAILABLE"


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401
        import pyarrow.ipc  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise FormatUnavailable("Parquet and Arrow exports need pyarrow on the server: "
                                "pip install 'tracebus[arrow]' (CSV needs nothing)") from None
    return pyarrow


def check_format(fmt: str) -> None:
    """Raises FormatUnavailable when ``fmt`` needs pyarrow and it is missing (before any byte)."""
    if fmt != "csv":
        _pyarrow()


def write(chunks: Iterable[tuple[list, list]], fmt: str, types: Mapping[str, str],
          columns: Sequence[str] = ()) -> Iterator[bytes]:
    """The bytes of the export of ``chunks`` (``(columns, rows)`` per stored chunk) in ``fmt``.

    Args:
        chunks: the section's chunks, in order (read lazily: one at a time).
        fmt(str): one of :data:`FORMATS`.
        types(Mapping[str, str]): column -> one of :data:`TYPES`.
        columns(Sequence[str]): the columns of an empty result (its schema), when known.

    Raises:
        FormatUnavailable: Parquet or Arrow without pyarrow.
    """
    if fmt == "csv":
        return _csv(chunks, columns)
    pa = _pyarrow()
    return _arrow(pa, chunks, fmt, types, columns)


def arrow_type(pa, name: str):
    return {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "timestamp": pa.timestamp("s"),
            "date": pa.date32(), "bool": pa.bool_()}[name]


def _arrow(pa, chunks, fmt: str, types: Mapping[str, str], columns: Sequence[str]) -> Iterator[bytes]:
    sink = _Sink()
    writer = schema = None
    try:
        for cols, rows in chunks:
            if not rows:
                continue
            if schema is None:
                schema = _schema(pa, cols, rows, types)
                writer = _writer(pa, sink, schema, fmt)
            batch = _batch(pa, schema, cols, rows)
            if fmt == "parquet":
                writer.write_batch(batch, row_group_size=len(rows))
            else:
                writer.write_batch(batch)
            yield sink.take()
        if schema is None:  # no row at all: a valid empty file of the known columns
            schema = pa.schema([(c, arrow_type(pa, types.get(c, "string"))) for c in columns])
            writer = _writer(pa, sink, schema, fmt)
        writer.close()
        writer = None
        yield sink.take()
    finally:
        if writer is not None:
            writer.close()


def _writer(pa, sink, schema, fmt: str):
    out = pa.PythonFile(sink, mode="w")
    if fmt == "parquet":
        delta = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)
                 or pa.types.is_date32(f.type)]
        return pa.parquet.ParquetWriter(out, schema, compression=PARQUET_COMPRESSION,
                                        compression_level=PARQUET_LEVEL,
                                        use_dictionary=[n for n in schema.names if n not in delta],
                                        column_encoding={n: "DELTA_BINARY_PACKED" for n in delta})
    return pa.ipc.new_stream(out, schema)


def _schema(pa, columns: Sequence[str], rows: list, types: Mapping[str, str]):
    fields = []
    for i, name in enumerate(columns):
        if name in types:
            fields.append(pa.field(name, arrow_type(pa, types[name])))
            continue
        inferred = pa.array([r[i] for r in rows]).type
        fields.append(pa.field(name, pa.string() if pa.types.is_null(inferred) else inferred))
    return pa.schema(fields)


def _batch(pa, schema, columns: Sequence[str], rows: list):
    by_name = dict(zip(columns, zip(*rows)))
    arrays = []
    for field in schema:
        values = by_name.get(field.name)
        if values is None:
            arrays.append(pa.nulls(len(rows), field.type))
        elif pa.types.is_timestamp(field.type) or pa.types.is_date32(field.type):
            arrays.append(_parsed(pa, pa.array(values, pa.string()), field.type))
        else:
            try:
                if pa.types.is_integer(field.type) and any(type(v) is float for v in values):
                    raise ValueError("a float in an integer column")  # pyarrow would truncate it
                arrays.append(pa.array(values, field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
                arrays.append(pa.array([_coerced(v, field.type, pa) for v in values], field.type))
    return pa.record_batch(arrays, schema=schema)


def _coerced(value, to, pa):
    """One value as a number of type ``to`` (numeric text parsed), or None when it is not one."""
    if not (pa.types.is_integer(to) or pa.types.is_floating(to)):
        return None if value is None else str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if pa.types.is_floating(to):
        return number
    return int(number) if number.is_integer() else None


def _parsed(pa, text, to):
    """Timestamp or date text as ``to``; a value that does not parse becomes null."""
    try:
        return pa.compute.cast(text, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        fmt = TIMESTAMP_FORMAT if pa.types.is_timestamp(to) else DATE_FORMAT
        stamps = pa.compute.strptime(text, format=fmt, unit="s", error_is_null=True)
        return stamps if pa.types.is_timestamp(to) else pa.compute.cast(stamps, to)


def _csv(chunks, columns: Sequence[str]) -> Iterator[bytes]:
    """RFC 4180 CSV, header first; nulls are empty cells; text that would start a formula
    is neutralised (:mod:`tracebus.jobs.csvcells`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    header = False
    for cols, rows in chunks:
        if not header:
            writer.writerow(neutral_row(cols))
            header = True
        writer.writerows(map(neutral_row, rows))
        yield out.getvalue().encode("utf-8")
        out.seek(0)
        out.truncate()
    if not header:
        writer.writerow(neutral_row(columns))
        yield out.getvalue().encode("utf-8")


class _Sink:
    """A write-only file that hands over what was written since the last :meth:`take`."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.position = 0
        self.closed = False

    def write(self, data) -> int:
        data = bytes(data)
        self.parts.append(data)
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data
