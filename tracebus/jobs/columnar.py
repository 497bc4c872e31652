"""The columnar copy of a result chunk: the same rows as a one-row-group Parquet file.

A worker that knows every column's type (the job kind gives the unit a type map,
:meth:`tracebus.jobs.runner.UnitContext.set_column_types`) stores, next to each msgpack
chunk, its rows typed and encoded by pyarrow (:mod:`tracebus.jobs.typed`, the export's own
options), in the same MULTI as the chunk and with the same TTL
(:class:`tracebus.jobs.results.ChunkWriter`). The Parquet export then stitches these files
without decoding a row (:mod:`tracebus.jobs.parquet_stitch`), and the Arrow export reads
them with pyarrow's C++ reader instead of converting msgpack rows in Python.

A stored copy is ``0x01``, a 4-byte little-endian length, the msgpack of the file's
:class:`~tracebus.jobs.parquet_stitch.Located` (where its footer's offsets are: the API walks
no footer), then the Parquet file. A worker without pyarrow, a section without a full type map,
or ``TRACEBUS_COLUMNAR_COPY=0`` (the default: pyarrow costs every worker 70-95 MB of RSS)
stores no copy; readers then convert the msgpack chunk.
"""

from __future__ import annotations

import logging
import struct
import sys
from typing import Mapping, Sequence

import msgpack

from tracebus.jobs import parquet_stitch, typed

log = logging.getLogger(__name__)

#: First byte of a stored copy (the format's version).
FORMAT = 1
_HEAD = struct.Struct("<BI")
_state: dict = {}


def _pyarrow():
    """pyarrow for the copies of this process, or None (loaded and set up once)."""
    if "pa" not in _state:
        pa = typed.load()
        if pa is not None:
            _no_pandas_probe(pa)
        _state["pa"] = pa
    return _state["pa"]


def _no_pandas_probe(pa) -> None:
    """Keep pyarrow from importing pandas in a worker that has not.

    ``pyarrow.array`` of a Python list asks whether pandas is installed, and where it is (the
    bench's venv) imports it: +43 MB of RSS in every worker for a check that never matters to a
    list of cells. pyarrow asks once per process; answered "no" here while pandas is hidden,
    pyarrow still imports it when something really needs it (``to_pandas``). A pyarrow
    without this private shim just loses the saving.
    """
    if "pandas" in sys.modules:
        return
    shim = getattr(getattr(pa, "lib", None), "_pandas_api", None)
    if shim is None:
        return
    sys.modules["pandas"] = None  # an import of a None entry raises ImportError
    try:
        shim.have_pandas
    except Exception:  # a later pyarrow's shim: no saving, no harm
        pass
    finally:
        del sys.modules["pandas"]


def covers(columns: Sequence[str], types: Mapping[str, str] | None) -> bool:
    """True when ``types`` names every one of ``columns`` (a copy's schema is then fixed by
    the map, the same in every chunk and in the API)."""
    return bool(types) and all(c in types for c in columns)


def encode(columns: Sequence[str], rows: Sequence[Sequence], types: Mapping[str, str]) -> bytes | None:
    """The stored copy of one chunk, or None (no pyarrow, a column without a type, or the
    conversion failed: the chunk is then read the slow way, never lost)."""
    if not rows or not covers(columns, types):
        return None
    pa = _pyarrow()
    if pa is None:
        return None
    try:
        schema = typed.declared_schema(pa, columns, types)
        data = typed.parquet_file(pa, typed.batch(pa, schema, columns, list(rows)))
        located = msgpack.packb(parquet_stitch.locate(data).pack())
    except Exception as e:  # an optional copy never fails the unit that writes the chunk
        log.warning("no columnar copy of a chunk (%s: %s); the export converts it", type(e).__name__, e)
        return None
    return _HEAD.pack(FORMAT, len(located)) + located + data


def decode(value) -> tuple[memoryview, parquet_stitch.Located]:
    """(the Parquet file, where its footer's offsets are) of a stored copy.

    Raises:
        ValueError: not a copy of a known format.
    """
    if len(value) < _HEAD.size or value[0] != FORMAT:
        raise ValueError("not a columnar copy of a known format")
    _, n = _HEAD.unpack_from(value, 0)
    start = _HEAD.size + n
    try:
        located = parquet_stitch.Located.unpack(msgpack.unpackb(memoryview(value)[_HEAD.size:start]))
    except Exception as e:
        raise ValueError(f"undecodable columnar copy header: {e}") from None
    return memoryview(value)[start:], located
