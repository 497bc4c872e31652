"""Result chunks against a real Redis: codec, fenced writes, pages, the NDJSON stream."""

from __future__ import annotations

import json
import time

import msgpack
import pytest
from tests.helpers import create_trace_job, ndjson_lines

from tracebus.engine.errors import DecodeError
from tracebus.errors import InvalidParams
from tracebus.jobs.errors import JobNotComplete, JobResultExpired, StaleAttempt
from tracebus.jobs.keys import JobKeys
from tracebus.trace import ndjson
from tracebus.jobs.chunkcodec import PLAIN, ZLIB, decode_chunk, encode_chunk
from tracebus.jobs.store import JobStore
from tracebus.jobs.results import ChunkWriter, page
from tests.topology import ON_NODE_AND_CLUSTER

COLUMNS = ["CONTAINERID", "WORKCENTERNAME", "N", "QTY", "NOTE"]


@pytest.fixture
def keys(settings):
    return JobKeys(settings.key_prefix)


@pytest.fixture
def store(redis_client, keys, settings):
    cfg = settings.replace(chunk_cids=2, job_max_inflight_units=100, user_max_inflight=5)
    return JobStore(redis_client, cfg)


def make_job(store, n_cids=8, domains=("history", "materials")):
    """A job whose units are all queued (4 units per domain with 8 CIDs)."""
    job_id = create_trace_job(store, {"profile": "query_tool", "user": "u",
                           "container_ids": [f"c{i}" for i in range(n_cids)], "domains": list(domains)})
    store.take_next_units(job_id, 1000)
    return job_id


def rows_of(unit, n):
    return [[f"c{unit}", "焊接_DB", i, i * 1.5, None] for i in range(n)]


def write_unit(store, job_id, unit, parts, commit=True, finish=True):
    """Run one unit writing ``parts`` (a list of row counts) and return all its rows."""
    attempt = store.begin_unit(job_id, unit)
    # One part per write (no max_rows), so the parts are exactly ``parts``.
    writer = ChunkWriter(store.redis, store.keys, job_id, store.plan(job_id).section_of(unit), unit, attempt,
                         store.settings.job_ttl_s)
    rows, start = [], 0
    for n in parts:
        chunk = [[f"u{unit}", "焊接_DB", start + i, (start + i) * 1.5, None] for i in range(n)]
        writer.write(COLUMNS, chunk)
        rows += chunk
        start += n
    if commit:
        writer.commit()
        if finish:
            store.finish_unit(job_id, unit, attempt, writer.rows)
    return [dict(zip(COLUMNS, r)) for r in rows]


def test_codec_round_trips_and_marks_compression():
    rows = rows_of(1, 2000)
    packed = encode_chunk(COLUMNS, rows)
    assert packed[0] == ZLIB and decode_chunk(packed) == (COLUMNS, rows)
    plain = encode_chunk(COLUMNS, rows, compress=False)
    assert plain[0] == PLAIN and decode_chunk(plain) == (COLUMNS, rows) and len(packed) < len(plain)
    assert encode_chunk(COLUMNS, rows[:2])[0] == PLAIN  # too small to pay
    with pytest.raises(DecodeError):
        decode_chunk(b"\x07garbage")


@ON_NODE_AND_CLUSTER
def test_pages_over_many_chunks_equal_the_concatenation(store):
    job_id = make_job(store)
    units = store.units_by_section(job_id)["history"]
    expected = []
    for unit, parts in zip(units, [[3, 3, 1], [0], [5], [2, 4]]):
        expected += write_unit(store, job_id, unit, [p for p in parts if p])
    assert len(expected) == 18
    for limit in (1, 2, 3, 4, 7, 18, 50):
        got, offset = [], 0
        while offset is not None:
            result = page(store.redis, store.keys, job_id, "history", offset, limit, units, False)
            assert result["total"] == 18 and result["complete"]
            got += result["rows"]
            offset = result["next_offset"]
        assert got == expected, limit
    for offset in range(19):
        for limit in (1, 5, 100):
            result = page(store.redis, store.keys, job_id, "history", offset, limit, units, False)
            assert result["rows"] == expected[offset:offset + limit]
            end = offset + len(result["rows"])
            assert result["next_offset"] == (end if end < 18 else None)
    assert page(store.redis, store.keys, job_id, "history", 0, 1, units, False)["columns"] == COLUMNS
    beyond = page(store.redis, store.keys, job_id, "history", 100, 10, units, False)
    assert beyond["rows"] == [] and beyond["next_offset"] is None and beyond["total"] == 18


@ON_NODE_AND_CLUSTER
def test_page_rejects_bad_offsets_and_limits(store):
    job_id = make_job(store)
    units = store.units_by_section(job_id)["history"]
    for offset, limit in ((-1, 10), (0, 0), (0, -5)):
        with pytest.raises(InvalidParams):
            page(store.redis, store.keys, job_id, "history", offset, limit, units, True)


@ON_NODE_AND_CLUSTER
def test_partial_pages_read_a_committed_prefix_that_never_shifts(store):
    job_id = make_job(store)
    units = store.units_by_section(job_id)["history"]
    first = write_unit(store, job_id, units[0], [3])
    third = write_unit(store, job_id, units[2], [4])  # committed out of order
    with pytest.raises(JobNotComplete):
        page(store.redis, store.keys, job_id, "history", 0, 10, units, False)
    before = page(store.redis, store.keys, job_id, "history", 0, 10, units, True)
    assert before["rows"] == first and before["total"] == 3 and not before["complete"]
    assert before["next_offset"] is None
    second = write_unit(store, job_id, units[1], [2])
    after = page(store.redis, store.keys, job_id, "history", 0, 10, units, True)
    assert after["rows"][:3] == first and after["rows"] == first + second + third
    assert after["total"] == 9 and not after["complete"]
    write_unit(store, job_id, units[3], [1])
    assert page(store.redis, store.keys, job_id, "history", 0, 100, units, False)["complete"]


@ON_NODE_AND_CLUSTER
def test_a_page_only_reads_the_chunks_it_overlaps(store, redis_client, keys):
    job_id = make_job(store)
    units = store.units_by_section(job_id)["history"]
    rows = []
    for unit in units:
        rows += write_unit(store, job_id, unit, [5, 5])
    # Rows 12..17 live in unit 1 part 0 (10..14) and part 1 (15..19): delete every other chunk.
    for unit in units:
        for part in (0, 1):
            if (unit, part) not in ((units[1], 0), (units[1], 1)):
                redis_client.delete(keys.job_chunk(job_id, "history", unit, part, 1))
    result = page(redis_client, keys, job_id, "history", 12, 6, units, False)
    assert result["rows"] == rows[12:18] and result["total"] == 40
    with pytest.raises(JobResultExpired):
        page(redis_client, keys, job_id, "history", 12, 9, units, False)


@ON_NODE_AND_CLUSTER
def test_stale_attempts_cannot_write_or_commit(store, keys):
    job_id = make_job(store)
    old = store.begin_unit(job_id, 0)
    stale = ChunkWriter(store.redis, keys, job_id, "history", 0, old, 60)
    stale.write(COLUMNS, rows_of(0, 3))
    new = store.begin_unit(job_id, 0)  # the message was redelivered: a newer attempt
    with pytest.raises(StaleAttempt):
        stale.write(COLUMNS, rows_of(0, 3))
    with pytest.raises(StaleAttempt):
        stale.commit()
    fresh = ChunkWriter(store.redis, keys, job_id, "history", 0, new, 60)
    fresh.write(COLUMNS, rows_of(0, 2))
    fresh.commit()
    with pytest.raises(StaleAttempt):
        ChunkWriter(store.redis, keys, job_id, "history", 0, old, 60).commit()
    assert msgpack.unpackb(store.redis.hget(keys.job_manifest(job_id, "history"), 0)) == [new, [2]]


def test_a_chunk_written_as_the_job_is_cancelled_never_outlives_the_jobs_status(store, keys):
    # Given a unit whose write passes its fence, then the job is cancelled before the chunk's SET
    job_id = make_job(store)
    attempt = store.begin_unit(job_id, 0)
    writer = ChunkWriter(store.redis, keys, job_id, "history", 0, attempt, store.settings.job_ttl_s)
    fence = writer._write

    def fence_then_cancel(*args, **kwargs):
        passed = fence(*args, **kwargs)
        store.cancel(job_id)
        time.sleep(0.02)  # the cancel's TTL is set well before the chunk's SET
        return passed

    writer._write = fence_then_cancel
    writer.write(COLUMNS, rows_of(0, 3))
    # Then the late chunk (never committed, never read) expires no later than the job hash
    chunk = store.redis.execute_command("PEXPIRETIME", keys.job_chunk(job_id, "history", 0, 0, attempt))
    status = store.redis.execute_command("PEXPIRETIME", keys.job(job_id))
    assert 0 < chunk <= status
    # And the next write is fenced off
    writer._write = fence
    with pytest.raises(StaleAttempt):
        writer.write(COLUMNS, rows_of(0, 1))


def test_an_artifact_stored_after_a_cancel_never_outlives_the_jobs_status(store, keys):
    # Given a cancelled job, and a unit that was in flight storing an artifact a moment later
    job_id = make_job(store)
    store.cancel(job_id)
    time.sleep(0.02)
    store.put_artifact(job_id, "late", b"x")
    # Then the artifact expires no later than the job hash
    artifact = store.redis.execute_command("PEXPIRETIME", keys.job_artifact(job_id, "late"))
    assert 0 < artifact <= store.redis.execute_command("PEXPIRETIME", keys.job(job_id))


@ON_NODE_AND_CLUSTER
def test_a_rerun_writes_its_own_chunks_and_drops_the_crashed_attempts(store, redis_client, keys):
    job_id = make_job(store, n_cids=2, domains=("history",))
    crashed = store.begin_unit(job_id, 0)
    writer = ChunkWriter(redis_client, keys, job_id, "history", 0, crashed, 60)
    writer.write(COLUMNS, rows_of(9, 4))
    writer.write(COLUMNS, rows_of(9, 4))  # then the worker is killed, nothing committed
    rows = write_unit(store, job_id, 0, [4, 4])
    chunks = {k.decode() for k in redis_client.scan_iter(match=keys.job_scan(job_id))
              if not k.decode().startswith(keys.job(job_id))}
    rerun = msgpack.unpackb(redis_client.hget(keys.job_manifest(job_id, "history"), 0))[0]
    assert rerun == crashed + 1
    # the crashed attempt's chunks are deleted when the rerun commits
    assert chunks == {keys.job_chunk(job_id, "history", 0, part, rerun) for part in (0, 1)}
    result = page(redis_client, keys, job_id, "history", 0, 100, [0], False)
    assert result["rows"] == rows and result["total"] == 8


@ON_NODE_AND_CLUSTER
def test_units_without_rows_commit_empty(store):
    job_id = make_job(store, n_cids=4, domains=("holds",))
    write_unit(store, job_id, 0, [])
    write_unit(store, job_id, 1, [])
    result = page(store.redis, store.keys, job_id, "holds", 0, 10, [0, 1], False)
    assert result == {"columns": [], "rows": [], "total": 0, "next_offset": None, "complete": True}


def parse(lines):
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    return [json.loads(line) for line in lines]


@ON_NODE_AND_CLUSTER
def test_the_stream_follows_the_ndjson_protocol(store):
    job_id = make_job(store, n_cids=4, domains=("history", "materials", "rejects"))
    history = write_unit(store, job_id, 0, [2, 1]) + write_unit(store, job_id, 1, [3])
    materials = write_unit(store, job_id, 2, []) + write_unit(store, job_id, 3, [1])
    write_unit(store, job_id, 4, [1])
    attempt = store.begin_unit(job_id, 5)
    store.fail_unit(job_id, 5, attempt, "ORA-01013")
    status = store.status(job_id)
    raw = list(ndjson.stream(store, job_id, "query_tool", status["sections"], status["failed_sections"]))
    assert b"\xe7\x84\x8a" in b"".join(raw)  # 焊 kept as UTF-8, not \\u-escaped
    lines = parse(list(ndjson_lines(raw)))
    assert [line["type"] for line in lines] == [
        "meta", "domain_start", "records", "records", "records", "domain_end",
        "domain_start", "records", "domain_end", "warning", "complete"]
    assert lines[0] == {"type": "meta", "job_id": job_id, "profile": "query_tool",
                        "domains": ["history", "materials", "rejects"]}
    assert lines[1] == {"type": "domain_start", "domain": "history", "total": 6}
    assert [(r["batch"], r["count"]) for r in lines[2:5]] == [(0, 2), (1, 1), (2, 3)]
    assert [row for r in lines[2:5] for row in r["data"]] == history
    assert lines[7]["data"] == materials and lines[8] == {"type": "domain_end", "domain": "materials",
                                                          "count": 1}
    assert lines[9] == {"type": "warning", "code": "EVENTS_PARTIAL_FAILURE", "failed_domains": ["rejects"]}
    assert lines[10] == {"type": "complete", "total_records": 7}


@ON_NODE_AND_CLUSTER
def test_the_stream_refuses_incomplete_or_expired_results(store, redis_client, keys):
    job_id = make_job(store, n_cids=4, domains=("history",))
    write_unit(store, job_id, 0, [2])
    with pytest.raises(JobNotComplete):
        ndjson.stream(store, job_id, "query_tool", ["history"])
    write_unit(store, job_id, 1, [2])
    lines = ndjson.stream(store, job_id, "query_tool", ["history"])
    redis_client.delete(keys.job_chunk(job_id, "history", 1, 0, 1))  # expires mid-stream
    tail = parse(list(ndjson_lines(lines)))[-1]
    assert tail["type"] == "error" and tail["code"] == "JOB_RESULT_EXPIRED"
    with pytest.raises(JobResultExpired):
        ndjson.stream(store, job_id, "query_tool", ["history"])


@ON_NODE_AND_CLUSTER
def test_max_rows_cuts_writes_into_chunks_of_that_size(store, keys):
    job_id = make_job(store, n_cids=2, domains=("history",))
    attempt = store.begin_unit(job_id, 0)
    writer = ChunkWriter(store.redis, keys, job_id, "history", 0, attempt, 60, max_rows=5)
    rows = rows_of(0, 12)
    for batch in (rows[:3], rows[3:7], rows[7:12]):
        writer.write(COLUMNS, batch)
    assert writer.counts == [5, 5]  # the last 2 rows wait for commit
    assert writer.commit() == 12 and writer.counts == [5, 5, 2]
    result = page(store.redis, keys, job_id, "history", 0, 100, [0], False)
    assert result["rows"] == [dict(zip(COLUMNS, r)) for r in rows]
