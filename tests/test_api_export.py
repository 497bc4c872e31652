"""Results as Parquet, Arrow and CSV (issue 28, item 3): ``GET /api/v1/jobs/{id}/export``.

Real redis-server and trace workers, the Falcon TestClient; the files are read back as a data
tool reads them (DuckDB's read_parquet, pyarrow's readers) and compared with the rows of the
job's ``/result`` pages, which are the source's. One Parquet row group and one Arrow record
batch per stored chunk; typed columns by :mod:`tracebus.trace.coltypes`.
"""

from __future__ import annotations

import csv
import io

import duckdb
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from tests.api_support import (api_broker, api_settings, body, client, make_client, page_all,  # noqa: F401
                               trace_cids, trace_workers, user, wait_job)
from tracebus.jobs import export
from tracebus.jobs.chunkcodec import encode_chunk
from tracebus.jobs.feed import Part
from tracebus.jobs.store import JobStore
from tracebus.trace import coltypes, domains

#: DuckDB's name of each exported type.
DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE", "timestamp": "TIMESTAMP",
                "date": "DATE"}


@pytest.fixture(scope="module")
def finished(api_settings, api_broker, trace_workers, trace_cids):
    """A completed job of history, rejects and holds over 700 CIDs (several units and chunks each)."""
    client = make_client(api_settings, api_broker, "exporter")
    resp = client.simulate_post("/api/trace/events", json=body(trace_cids[:700], ("history", "rejects", "holds")))
    job_id = resp.json["job_id"]
    assert wait_job(client, job_id)["state"] == "completed"
    return client, job_id


def chunks_of(api_settings, api_broker, job_id: str, domain: str) -> int:
    layout = JobStore(api_broker.client, api_settings).layouts(job_id, [domain])[domain]
    return sum(1 for _, _, rows in layout.parts if rows)


def text(value) -> object:
    """An exported value as the JSON rows carry it (timestamps and days as the sources' text)."""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S" if hasattr(value, "hour") else "%Y-%m-%d")
    return value


@pytest.mark.parametrize("domain", ["history", "rejects", "holds"])
def test_duckdb_reads_the_parquet_export_with_the_domains_rows_and_typed_columns(
        finished, api_settings, api_broker, tmp_path, domain):
    client, job_id = finished
    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"domain": domain, "format": "parquet"})
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/vnd.apache.parquet"
    assert f"{job_id}-{domain}.parquet" in resp.headers["content-disposition"]
    path = tmp_path / f"{domain}.parquet"
    path.write_bytes(resp.content)
    expected = page_all(client, job_id, domain, 5000)

    db = duckdb.connect()
    (count,) = db.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
    described = db.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    rows = db.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()

    assert count == len(expected) > 0
    types = coltypes.types_of(domain)
    assert [(name, kind) for name, kind, *_ in described] == [(c, DUCKDB_TYPES[types[c]]) for c in domains.COLUMNS[domain]]
    columns = list(domains.COLUMNS[domain])
    assert [{c: text(v) for c, v in zip(columns, row)} for row in rows] == expected
    assert pq.ParquetFile(path).metadata.num_row_groups == chunks_of(api_settings, api_broker, job_id, domain) > 1


def test_the_arrow_stream_has_one_record_batch_per_chunk_and_pyarrow_loads_it(finished, api_settings, api_broker):
    client, job_id = finished
    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"domain": "history", "format": "arrow"})
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/vnd.apache.arrow.stream"

    reader = pa.ipc.open_stream(resp.content)
    batches = list(reader)
    table = pa.Table.from_batches(batches)

    assert len(batches) == chunks_of(api_settings, api_broker, job_id, "history")
    assert table.schema.field("TRACKINTIMESTAMP").type == pa.timestamp("s")
    assert table.schema.field("TRACKINQTY").type == pa.int64()
    assert table.schema.field("CONTAINERID").type == pa.string()
    expected = page_all(client, job_id, "history", 5000)
    assert [{k: text(v) for k, v in row.items()} for row in table.to_pylist()] == expected


def test_the_csv_export_is_the_rows_with_a_header(finished):
    client, job_id = finished
    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"domain": "holds", "format": "csv"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/csv")

    rows = list(csv.reader(io.StringIO(resp.text)))

    assert rows[0] == list(domains.COLUMNS["holds"])
    expected = page_all(client, job_id, "holds", 5000)
    assert rows[1:] == [["" if r[c] is None else str(r[c]) for c in rows[0]] for r in expected]


def test_the_export_is_written_chunk_by_chunk(finished, api_settings, api_broker):
    client, job_id = finished
    from tracebus.trace.service import TraceService
    service = TraceService(api_settings, api_broker)

    pieces = list(service.export(job_id, "history", "parquet"))

    # A row group per stored chunk goes out before the next chunk is read; the footer last.
    assert len(pieces) == chunks_of(api_settings, api_broker, job_id, "history") + 1
    assert pieces[0][:4] == b"PAR1" and pieces[-1][-4:] == b"PAR1" and all(pieces[:-1])


def test_an_empty_domain_is_a_valid_empty_file_of_its_columns(api_settings, api_broker, trace_workers, user,
                                                              tmp_path):
    client = make_client(api_settings, api_broker, user)
    job_id = client.simulate_post("/api/trace/events", json=body(["NO-SUCH-CID"] * 1 + [f"X{i}" for i in range(250)],
                                                                   ("holds",))).json["job_id"]
    wait_job(client, job_id)

    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export")  # one domain: it may be left out

    path = tmp_path / "empty.parquet"
    path.write_bytes(resp.content)
    assert resp.status_code == 200
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone() == (0,)
    assert pq.read_schema(path).names == list(domains.COLUMNS["holds"])


def test_bad_requests_are_4xx_before_any_byte(finished, api_settings, api_broker, trace_cids, user):
    client, job_id = finished
    for params, status, words in (({"format": "parquet"}, 400, "history, rejects, holds"),
                                  ({"domain": "jobs"}, 400, "domain must be one of"),
                                  ({"domain": "history", "format": "xlsx"}, 400, "format must be one of"),
                                  ({"domain": "h" * 65}, 400, "at most 64")):
        resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params=params)
        assert resp.status_code == status and words in resp.text, (params, resp.text)
    other = make_client(api_settings, api_broker, user)
    assert other.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"domain": "history"}).status_code == 404
    idle = make_client(api_settings, api_broker, user, queue="idle-queue")
    queued = idle.simulate_post("/api/trace/events", json=body(trace_cids[:300])).json["job_id"]
    resp = idle.simulate_get(f"/api/v1/jobs/{queued}/export", params={"domain": "history"})
    assert resp.status_code == 409 and resp.json["status"] == "queued"
    idle.simulate_post(f"/api/v1/jobs/{queued}/cancel")


def test_every_exported_type_is_one_of_the_documented_types():
    assert set(coltypes.TYPES.values()) <= set(export.TYPES)
    for domain in domains.DOMAINS:
        assert set(coltypes.types_of(domain)) == set(domains.COLUMNS[domain])


def test_a_value_not_of_its_columns_type_is_null_and_numeric_text_its_number():
    rows = [[1, "2025-01-02 03:04:05", 1.5], ["7", "not a time", "2.25"], [2.5, None, "x"], [None, "2025-01-02", 3]]
    chunks = [Part(len(rows), encode_chunk(["N", "T", "F"], rows))]

    table = pa.ipc.open_stream(b"".join(export.write(iter(chunks), "arrow", {"N": "int64", "T": "timestamp",
                                                                             "F": "float64"}))).read_all()

    assert table.column("N").to_pylist() == [1, 7, None, None]
    assert [text(v) for v in table.column("T").to_pylist()] == ["2025-01-02 03:04:05", None, None, None]
    assert table.column("F").to_pylist() == [1.5, 2.25, None, 3.0]


#: Chunks for the raw conversion: columns of every type, with nulls, and cells that only the
#: cell-by-cell rules convert (numeric text, a fraction or a float in an integer column, text
#: that is no time, a BLOB, an integer past 2**53, a boolean).
RAW_TYPES = {"S": "string", "N": "int64", "F": "float64", "T": "timestamp", "D": "date"}
RAW_CASES = {
    "typed": [["a", 1, 1.5, "2025-01-02 03:04:05", "2025-01-02"], [None, None, None, None, None],
              ["文字", -7, 3, "2025-12-31 23:59:59", "2024-02-29"]],
    "float that is whole in an integer column": [["a", 2.0, 1.0, None, None]],
    "fraction in an integer column": [["a", 1.5, 1.0, None, None], ["b", 3, 2.0, None, None]],
    "numeric text": [["a", "7", "2.25", None, None]],
    "text that is no time": [["a", 1, 1.0, "not a time", "2025-13-45"]],
    "BLOB in a text column": [[b"\xff\x00", 1, 1.0, None, None], [b"ok", 2, 2.0, None, None]],
    "integer past 2**53": [["a", 2 ** 60 + 1, 1.0, None, None]],
    "boolean in an integer column": [["a", True, 1.0, None, None]],
}


@pytest.mark.parametrize("case", list(RAW_CASES))
def test_a_chunk_converted_from_its_raw_rows_is_the_batch_of_its_decoded_rows(case):
    from tracebus.jobs import typed
    from tracebus.jobs.chunkcodec import decode_chunk, decode_raw

    data = encode_chunk(list(RAW_TYPES), RAW_CASES[case])
    schema = typed.declared_schema(pa, list(RAW_TYPES), RAW_TYPES)

    fast = typed.raw_batch(pa, schema, *decode_raw(data))
    expected = typed.batch(pa, schema, *decode_chunk(data))

    # the raw conversion either gives the same batch or declines (the export then converts cell by cell)
    if case in ("typed", "float that is whole in an integer column"):
        assert fast is not None and fast.equals(expected), (fast, expected)
    elif case in ("fraction in an integer column", "integer past 2**53"):  # truncated, rounded by float64
        assert fast is None
    else:
        assert fast is None or fast.equals(expected)
    # and the export's bytes do not depend on which way a chunk went
    parts = [Part(len(RAW_CASES[case]), data)]
    table = pa.ipc.open_stream(b"".join(export.write(iter(parts), "arrow", RAW_TYPES, list(RAW_TYPES)))).read_all()
    assert table.to_batches()[0].equals(expected)
