"""The columnar copies (issue 28): workers store a one-row-group Parquet file next to each chunk,
the Parquet export stitches them, the Arrow export reads them; chunks without one are converted.

Real redis-server, real trace workers (with pyarrow, so copies are on by default), the Falcon
TestClient. The files are read back with pyarrow and DuckDB and compared with the rows of the
NDJSON stream. Copies are removed from Redis to make the chunks that a worker without pyarrow
(or ``TRACEBUS_COLUMNAR_COPY=0``, or an older job) leaves: the export must be byte for byte the same.
"""

from __future__ import annotations

import io
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.api_support import (api_broker, api_settings, body, make_client, trace_cids, trace_workers,  # noqa: F401
                               wait_job)
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs import columnar
from tracebus.jobs.chunkcodec import decode_chunk
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.results import ChunkWriter
from tracebus.jobs.settings import JobSettings
from tracebus.jobs.store import JobStore
from tests.helpers import create_trace_job
from tracebus.trace import coltypes, domains

DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE", "timestamp": "TIMESTAMP",
                "date": "DATE"}


def _job(api_settings, api_broker, user, cids, doms):
    client = make_client(api_settings, api_broker, user)
    job_id = client.simulate_post("/api/trace/events", json=body(cids, doms)).json["job_id"]
    assert wait_job(client, job_id)["state"] == "completed"
    return client, job_id


@pytest.fixture(scope="module")
def finished(api_settings, api_broker, trace_workers, trace_cids):
    return _job(api_settings, api_broker, "columnar", trace_cids[:700], ("history", "rejects", "holds"))


def chunk_keys(api_settings, api_broker, job_id, domain):
    """(chunk key, copy key) of every stored chunk with rows of ``domain``, in order."""
    store = JobStore(api_broker.client, api_settings)
    layout = store.layouts(job_id, [domain])[domain]
    k = store.keys
    return [(k.job_chunk(job_id, domain, u, p, layout.attempts[u]), k.job_chunk_copy(job_id, domain, u, p,
                                                                                    layout.attempts[u]))
            for u, p, rows in layout.parts if rows]


def stream_rows(client, job_id, domain) -> list[dict]:
    """The rows of ``domain`` in the NDJSON ``/stream``, in order."""
    resp = client.simulate_get(f"/api/trace/job/{job_id}/stream")
    assert resp.status_code == 200
    rows = []
    for line in resp.text.splitlines():
        doc = json.loads(line)
        if doc.get("type") == "records" and doc["domain"] == domain:
            rows.extend(doc["data"])
    return rows


def text(value):
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S" if hasattr(value, "hour") else "%Y-%m-%d")
    return value


def export(client, job_id, domain, fmt="parquet") -> bytes:
    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"domain": domain, "format": fmt})
    assert resp.status_code == 200, resp.text
    return resp.content


def test_every_chunk_of_a_typed_domain_has_a_copy_that_expires_with_it(finished, api_settings, api_broker):
    _, job_id = finished
    redis = api_broker.client
    for domain in ("history", "rejects", "holds"):
        pairs = chunk_keys(api_settings, api_broker, job_id, domain)
        assert pairs
        for chunk, copy in pairs:
            data, located = columnar.decode(redis.get(copy))
            cols, rows = decode_chunk(redis.get(chunk))
            assert pq.read_metadata(io.BytesIO(bytes(data))).num_rows == located.rows == len(rows)
            assert 0 < redis.ttl(copy) <= api_settings.job_ttl_s and 0 < redis.ttl(chunk) <= api_settings.job_ttl_s


@pytest.mark.parametrize("domain", ["history", "rejects"])
def test_the_stitched_parquet_has_the_streams_rows_and_typed_columns_in_pyarrow_and_duckdb(
        finished, api_settings, api_broker, tmp_path, domain):
    client, job_id = finished
    data = export(client, job_id, domain)
    path = tmp_path / f"{domain}.parquet"
    path.write_bytes(data)
    expected = stream_rows(client, job_id, domain)
    columns, types = list(domains.COLUMNS[domain]), coltypes.types_of(domain)

    table = pq.read_table(path)
    db = duckdb.connect()
    described = db.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    (count,) = db.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
    duck = db.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()

    assert table.num_rows == count == len(expected) > 0
    assert pq.ParquetFile(path).metadata.num_row_groups == len(chunk_keys(api_settings, api_broker, job_id, domain)) > 1
    assert [(n, k) for n, k, *_ in described] == [(c, DUCKDB_TYPES[types[c]]) for c in columns]
    assert table.schema.names == columns
    assert [{c: text(v) for c, v in zip(columns, row)} for row in duck] == expected
    assert [{c: text(v) for c, v in row.items()} for row in table.to_pylist()] == expected


def test_chunks_without_a_copy_give_the_same_file_mixed_or_all(api_settings, api_broker, trace_workers,
                                                               trace_cids, tmp_path):
    client, job_id = _job(api_settings, api_broker, "mixed", trace_cids[700:1300], ("history",))
    redis = api_broker.client
    pairs = chunk_keys(api_settings, api_broker, job_id, "history")
    assert len(pairs) >= 3
    with_copies = export(client, job_id, "history")
    arrow_with = pa.ipc.open_stream(export(client, job_id, "history", "arrow")).read_all()

    redis.delete(*[copy for _, copy in pairs[1::2]])  # every other chunk loses its copy
    mixed = export(client, job_id, "history")
    redis.delete(*[copy for _, copy in pairs])  # then all of them
    without = export(client, job_id, "history")
    arrow_without = pa.ipc.open_stream(export(client, job_id, "history", "arrow")).read_all()

    assert mixed == with_copies == without
    assert pq.read_table(io.BytesIO(mixed)).num_rows == len(stream_rows(client, job_id, "history"))
    (tmp_path / "mixed.parquet").write_bytes(mixed)
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)",
                                    [str(tmp_path / "mixed.parquet")]).fetchone()[0] == arrow_with.num_rows
    assert arrow_with.equals(arrow_without) and arrow_with.schema.field("TRACKINTIMESTAMP").type == pa.timestamp("s")


def test_a_copy_of_another_schema_is_not_stitched_but_converted(finished, api_settings, api_broker):
    client, job_id = finished
    redis = api_broker.client
    pairs = chunk_keys(api_settings, api_broker, job_id, "holds")
    before = export(client, job_id, "holds")
    chunk, copy = pairs[-1]
    saved = redis.get(copy)
    # A copy whose columns are not the section's (an older worker's type map, say).
    cols, rows = decode_chunk(redis.get(chunk))
    redis.set(copy, columnar.encode(["X"], [[r[0]] for r in rows], {"X": "string"}), ex=60)
    try:
        assert export(client, job_id, "holds") == before
    finally:
        redis.set(copy, saved, ex=60)


@ON_NODE_AND_CLUSTER
def test_a_writer_stores_the_copy_with_the_chunk_only_for_fully_typed_columns(redis_client, settings):
    store = JobStore(redis_client, settings.replace(chunk_cids=2))
    keys = JobKeys(settings.key_prefix)
    job_id = create_trace_job(store, {"profile": "query_tool", "user": "u", "container_ids": ["a", "b", "c", "d"],
                                      "domains": ["history"]})
    store.take_next_units(job_id, 10)
    cols = ["CONTAINERID", "TRACKINQTY"]
    rows = [["a", 1], ["b", 2]]
    cases = ((0, {"CONTAINERID": "string", "TRACKINQTY": "int64"}, True),
             (1, {"CONTAINERID": "string"}, False))  # a column without a type: no copy
    for unit, types, copied in cases:
        attempt = store.begin_unit(job_id, unit)
        writer = ChunkWriter(redis_client, keys, job_id, "history", unit, attempt, 60, columnar=True)
        writer.types = types
        writer.write(cols, rows)
        writer.commit()
        copy = redis_client.get(keys.job_chunk_copy(job_id, "history", unit, 0, attempt))
        assert (copy is not None) is copied
        if copied:
            data, _ = columnar.decode(copy)
            assert pq.read_table(pa.BufferReader(data)).to_pylist() == [{"CONTAINERID": "a", "TRACKINQTY": 1},
                                                                        {"CONTAINERID": "b", "TRACKINQTY": 2}]
            assert 0 < redis_client.ttl(keys.job_chunk_copy(job_id, "history", unit, 0, attempt)) <= 60


@ON_NODE_AND_CLUSTER
def test_a_rerun_drops_the_crashed_attempts_copies_and_the_switch_turns_copies_off(redis_client, settings):
    store = JobStore(redis_client, settings.replace(chunk_cids=2, columnar_copy=1))
    keys = JobKeys(settings.key_prefix)
    job_id = create_trace_job(store, {"profile": "query_tool", "user": "u", "container_ids": ["a", "b"],
                                      "domains": ["history"]})
    store.take_next_units(job_id, 10)
    types = {"CONTAINERID": "string", "TRACKINQTY": "int64"}
    crashed = store.begin_unit(job_id, 0)
    writer = ChunkWriter(redis_client, keys, job_id, "history", 0, crashed, 60, columnar=True)
    writer.types = types
    writer.write(["CONTAINERID", "TRACKINQTY"], [["a", 1]])
    assert redis_client.exists(keys.job_chunk_copy(job_id, "history", 0, 0, crashed))
    # The worker dies; the unit runs again on a store whose copies are switched off.
    off = JobStore(redis_client, settings.replace(chunk_cids=2, columnar_copy=0))
    rerun = off.begin_unit(job_id, 0)
    writer = off.chunk_writer(job_id, 0, rerun)
    writer.types = types
    writer.write(["CONTAINERID", "TRACKINQTY"], [["a", 1]])
    writer.commit()
    assert not writer.columnar and writer.copies == 0
    assert not redis_client.exists(keys.job_chunk_copy(job_id, "history", 0, 0, crashed))
    assert not redis_client.exists(keys.job_chunk(job_id, "history", 0, 0, crashed))
    assert not redis_client.exists(keys.job_chunk_copy(job_id, "history", 0, 0, rerun))


def test_the_switch_is_read_through_the_settings_helper():
    # Off by default: pyarrow in every worker costs more memory than a 114K job's worker may use.
    assert JobSettings.from_env({}).columnar_copy == 0
    assert JobSettings.from_env({"TRACEBUS_COLUMNAR_COPY": "1"}).columnar_copy == 1
    assert JobSettings.from_env({"TRACEBUS_COLUMNAR_COPY": "0"}).columnar_copy == 0


def test_an_empty_domain_is_an_empty_file_and_stream_of_its_typed_columns(api_settings, api_broker, trace_workers):
    client, job_id = _job(api_settings, api_broker, "empty", [f"NONE{i}" for i in range(600)], ("history",))
    parquet = pq.read_table(io.BytesIO(export(client, job_id, "history")))
    arrow = pa.ipc.open_stream(export(client, job_id, "history", "arrow")).read_all()
    expected = [(c, coltypes.types_of("history")[c]) for c in domains.COLUMNS["history"]]
    assert parquet.num_rows == arrow.num_rows == 0
    assert parquet.schema.names == arrow.schema.names == [c for c, _ in expected]
    assert arrow.schema.field("TRACKINTIMESTAMP").type == pa.timestamp("s")
    assert arrow.schema.field("TRACKINQTY").type == parquet.schema.field("TRACKINQTY").type == pa.int64()
