"""The Thrift compact codec and the Parquet stitcher, on files pyarrow writes.

The stitched file must be what a reader sees as the concatenation of the pieces (pyarrow and
DuckDB), whatever the pieces hold: dictionary pages or not, nulls, page statistics, one or
several pages per column chunk.
"""

from __future__ import annotations

import io
import random
import struct

import duckdb
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (tracebus.jobs.typed takes pyarrow as typed.load() gives it)
import pyarrow.parquet as pq
import pytest

from tracebus.jobs import parquet_stitch as ps
from tracebus.jobs import thrift_compact as tc
from tracebus.jobs import typed

TYPES = {"S": "string", "T": "timestamp", "Q": "int64", "F": "float64", "D": "date", "B": "bool"}
COLUMNS = list(TYPES)


def rows(n: int, seed: int) -> list[list]:
    r = random.Random(seed)
    return [[None if r.random() < 0.1 else f"LOT{r.randint(0, 50 if seed % 2 else 5000)}",
             f"2026-0{r.randint(1, 9)}-1{r.randint(0, 9)} 1{r.randint(0, 9)}:{r.randint(10, 59)}:0{r.randint(0, 9)}",
             None if r.random() < 0.05 else r.randint(-10 ** 12, 10 ** 12), r.random(), "2026-01-02",
             r.random() < 0.5] for _ in range(n)]


def piece(n: int, seed: int, **options) -> bytes:
    schema = typed.declared_schema(pa, COLUMNS, TYPES)
    batch = typed.batch(pa, schema, COLUMNS, rows(n, seed))
    if not options:
        return typed.parquet_file(pa, batch)
    out = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), out, **options)
    return out.getvalue()


def stitched(pieces, locate_first=False) -> bytes:
    st = ps.Stitcher()
    parts = [st.add(p, ps.locate(p) if locate_first else None) for p in pieces]
    assert all(part is not None for part in parts)
    return b"".join(parts) + st.finish()


def concat(pieces) -> pa.Table:
    return pa.concat_tables([pq.read_table(io.BytesIO(p)) for p in pieces])


def test_a_pyarrow_footer_reads_and_writes_back_to_the_same_bytes():
    for data in (piece(300, 1), piece(3000, 2, compression="snappy", write_page_index=True,
                                     data_page_size=4096)):
        start, end = ps.footer_span(data)
        fields, pos = tc.read_struct(memoryview(data)[start:end])
        assert pos == end - start
        assert bytes(tc.write_struct(fields)) == data[start:end]
        raw, _ = tc.read_struct(memoryview(data)[start:end], 0, {})  # every field kept raw
        assert bytes(tc.write_struct(raw)) == data[start:end]


@pytest.mark.parametrize("options", [{}, {"compression": "snappy", "data_page_size": 2048},
                                     {"compression": "none", "use_dictionary": False, "write_page_index": True}])
def test_stitched_pieces_read_as_their_concatenation_in_pyarrow_and_duckdb(options, tmp_path):
    pieces = [piece(n, seed, **options) for seed, n in enumerate((700, 1, 2500, 40))]
    data = stitched(pieces)
    path = tmp_path / "s.parquet"
    path.write_bytes(data)

    table = pq.read_table(path)
    meta = pq.ParquetFile(path).metadata
    expected = concat(pieces)
    db = duckdb.connect()

    assert table.equals(expected)
    assert meta.num_rows == 3241 and meta.num_row_groups == 4
    assert [meta.row_group(i).num_rows for i in range(4)] == [700, 1, 2500, 40]
    assert db.execute("SELECT count(*), sum(Q), count(S), count(DISTINCT S) FROM read_parquet(?)",
                      [str(path)]).fetchone() == (
        3241, pa.compute.sum(expected["Q"]).as_py(), 3241 - expected["S"].null_count,
        len(pa.compute.unique(expected["S"].drop_null())))
    # A filter DuckDB may answer from the row groups' statistics gives the rows pyarrow finds.
    big = pa.compute.max(expected["Q"]).as_py() - 10 ** 9
    assert db.execute("SELECT count(*) FROM read_parquet(?) WHERE Q > ?", [str(path), big]).fetchone()[0] == \
        pa.compute.sum(pa.compute.greater(expected["Q"], big).cast(pa.int64())).as_py()
    # Row group statistics still describe their own row group (DuckDB prunes by them).
    assert meta.row_group(2).column(2).statistics.max == pa.compute.max(
        pq.read_table(io.BytesIO(pieces[2]))["Q"]).as_py()


def test_a_located_piece_stitches_to_the_same_bytes_as_one_located_here():
    pieces = [piece(500, seed) for seed in range(3)]
    assert stitched(pieces, locate_first=True) == stitched(pieces)
    located = ps.locate(pieces[0])
    assert ps.Located.unpack(located.pack()) == located and located.rows == 500 and located.count == 1


def test_a_piece_of_another_schema_is_refused_and_nothing_is_recorded():
    st = ps.Stitcher()
    first = st.add(piece(10, 1))
    other = io.BytesIO()
    pq.write_table(pa.table({"S": ["x"]}), other)
    assert first[:4] == b"PAR1"
    assert st.add(other.getvalue()) is None
    assert st.rows == 10 and st.row_groups == 1
    last = st.add(piece(5, 2))
    data = first + last + st.finish()
    assert pq.read_table(io.BytesIO(data)).num_rows == 15


def test_broken_input_is_a_clear_error():
    good = piece(10, 1)
    with pytest.raises(ps.NotParquet):
        ps.locate(b"PAR1 not really PAR1")
    with pytest.raises(ps.NotParquet):
        ps.locate(good[:-9] + struct.pack("<I", 10 ** 6) + b"PAR1")
    start, end = ps.footer_span(good)
    truncated = good[:start] + good[start:end - 40] + struct.pack("<I", end - 40 - start) + b"PAR1"
    with pytest.raises(ps.NotParquet):
        ps.locate(truncated)
    with pytest.raises(tc.ThriftError):
        tc.read_struct(b"\x15")  # a field header and nothing after it


def test_every_compact_type_round_trips():
    fields = {1: (tc.TRUE, True), 2: (tc.FALSE, False), 3: (tc.BYTE, -5), 4: (tc.I16, -300), 5: (tc.I32, 2 ** 31 - 1),
              6: (tc.I64, -(2 ** 63)), 7: (tc.DOUBLE, 1.25), 8: (tc.BINARY, b"\x00\xffab"),
              9: (tc.LIST, (tc.I32, list(range(-20, 20)))), 10: (tc.LIST, (tc.TRUE, [True, False, True])),
              40: (tc.STRUCT, {1: (tc.BINARY, b"x"), 300: (tc.I64, 7)}),
              41: (tc.LIST, (tc.STRUCT, [{1: (tc.I32, 1)}, {}]))}
    data = bytes(tc.write_struct(fields))
    back, pos = tc.read_struct(data)
    assert back == fields and pos == len(data)
    assert tc.skip(data, 0, tc.STRUCT) == len(data)
    raw, _ = tc.read_struct(data, 0, {})
    assert bytes(tc.write_struct(raw)) == data
