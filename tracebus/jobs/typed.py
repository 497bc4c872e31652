"""Rows to typed Arrow data, and a chunk's rows as a one-row-group Parquet file.

The typed exports (:mod:`tracebus.jobs.export`) and the columnar copy a worker stores next to
each chunk (:mod:`tracebus.jobs.columnar`) build their Arrow data here, so a row group written
in a worker and one written in the API from the same rows are the same bytes.

Columns are typed by a map column -> type name (:data:`TYPES`): ``string``, ``int64``,
``float64``, ``timestamp`` (seconds, no zone: the sources' ``YYYY-MM-DD HH:MM:SS`` text),
``date`` (``YYYY-MM-DD``) and ``bool``; a column the map does not name is typed from the first
chunk's values (text when they are all null). A value that is not of its column's type
(a text that is no timestamp, date or number; a fraction in an integer column) becomes null;
numeric text is read as its number.

pyarrow is optional (``pip install 'tracebus[arrow]'``) and imported on first use
(:func:`load`), never when a process starts: it is about 1-2 s and 100 MB of library.
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

#: The column types a map may name.
TYPES = ("string", "int64", "float64", "timestamp", "date", "bool")
#: Parquet compression: zstd level 6 was smaller than snappy and zstd 1 and as fast, per 5,000-row
#: history chunk. Timestamps and integers are delta-encoded instead of dictionary-encoded: rows come
#: grouped by lot and in time order, so the deltas are small (history: 0.63x -> 0.50x the stored bytes).
PARQUET_COMPRESSION, PARQUET_LEVEL = "zstd", 6
#: Text formats of the timestamp and date columns (the sources' TO_CHAR / strftime output).
TIMESTAMP_FORMAT, DATE_FORMAT = "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"


def load():
    """pyarrow with the submodules used here, or None when it is not installed."""
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401
        import pyarrow.ipc  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return None
    # The C allocator, not pyarrow's own jemalloc pool, which kept what an export freed (an API
    # worker that served 120 Parquet exports stayed 20 MB over its idle size; issue 39): freed
    # arrays then go back with the rest of the heap (api/heap.py).
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    return pyarrow


def arrow_type(pa, name: str):
    return {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "timestamp": pa.timestamp("s"),
            "date": pa.date32(), "bool": pa.bool_()}[name]


def schema(pa, columns: Sequence[str], rows: list, types: Mapping[str, str]):
    """The Arrow schema of a section: ``types`` where it names a column, else inferred from ``rows``."""
    fields = []
    for i, name in enumerate(columns):
        if name in types:
            fields.append(pa.field(name, arrow_type(pa, types[name])))
            continue
        inferred = pa.array([r[i] for r in rows]).type
        fields.append(pa.field(name, pa.string() if pa.types.is_null(inferred) else inferred))
    return pa.schema(fields)


def declared_schema(pa, columns: Sequence[str], types: Mapping[str, str]):
    """The schema when ``types`` names every column (text for any it does not)."""
    return pa.schema([(c, arrow_type(pa, types.get(c, "string"))) for c in columns])


def batch(pa, schema, columns: Sequence[str], rows: list):
    """One record batch of ``rows`` (lists under ``columns``) in ``schema``."""
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


def raw_batch(pa, schema, columns: Sequence[str], rows: Sequence[tuple]):
    """:func:`batch` of rows whose text cells are UTF-8 bytes (:func:`tracebus.jobs.chunkcodec.decode_raw`),
    or None when they need :func:`batch`'s cell-by-cell rules (a value not of its column's type,
    numeric text, a fraction in an integer column, a column missing) or ``columns`` are not
    ``schema``'s: the caller then decodes the chunk again and calls :func:`batch`.

    pyarrow converts the rows as one struct array, walking them in C++ (no Python pass
    transposes them into columns): 3.4 ms for a 5,000-row history chunk where :func:`batch`
    takes about 9 ms, after a decode three times as slow. Text columns are read as binary and checked as UTF-8 by the cast;
    integer columns as float64, cast back safely, so that a fraction fails the cast instead of
    being truncated (pyarrow truncates a float given for an integer) and an integer past 2**53
    is left to :func:`batch`.
    """
    if list(columns) != schema.names:
        return None
    staged = [pa.field(f.name, _staged_type(pa, f.type)) for f in schema]
    try:
        cells = pa.array(rows, pa.struct(staged)).flatten()
        arrays = []
        for field, array in zip(schema, cells):
            if array.type == field.type:
                arrays.append(array)
            elif pa.types.is_binary(array.type):
                text = array.cast(pa.string())
                arrays.append(text if pa.types.is_string(field.type) else _parsed(pa, text, field.type))
            else:  # an integer column read as float64
                if array.null_count < len(array) and pa.compute.max(pa.compute.abs(array)).as_py() >= 2.0 ** 53:
                    return None
                arrays.append(array.cast(field.type))  # safe: a fraction raises
        return pa.record_batch(arrays, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None


def _staged_type(pa, to):
    """The type :func:`raw_batch` converts a column of type ``to`` into first."""
    if pa.types.is_string(to) or pa.types.is_timestamp(to) or pa.types.is_date32(to):
        return pa.binary()
    return pa.float64() if pa.types.is_integer(to) else to


def parquet_writer(pa, sink, schema):
    """A ParquetWriter with the export's options (zstd 6; delta-encoded integers and times)."""
    delta = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)
             or pa.types.is_date32(f.type)]
    return pa.parquet.ParquetWriter(sink, schema, compression=PARQUET_COMPRESSION,
                                    compression_level=PARQUET_LEVEL,
                                    use_dictionary=[n for n in schema.names if n not in delta],
                                    column_encoding={n: "DELTA_BINARY_PACKED" for n in delta})


def parquet_file(pa, data) -> bytes:
    """``data`` (a record batch, or a table) as a whole Parquet file of one row group (no row: no row group)."""
    out = io.BytesIO()
    writer = parquet_writer(pa, out, data.schema)
    if data.num_rows:
        writer.write(data, row_group_size=data.num_rows)
    writer.close()
    return out.getvalue()


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
