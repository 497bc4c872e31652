"""``/stream`` content negotiation and follow mode, through Falcon's test client over live workers.

The binary format must carry exactly the NDJSON stream's lines (the reader's expanded maps,
encoded as NDJSON, are the NDJSON body byte for byte); gzip and zstd must decompress to the
identical NDJSON bytes; a stream followed from right after the 202 must yield exactly the
rows of the completed result.
"""

from __future__ import annotations

import gzip
import json
import threading

import orjson
import pytest

from tests.api_support import (api_broker, api_settings, canonical, client, idle_client,  # noqa: F401
                               make_client, source_rows, submit, trace_cids, trace_workers, user,
                               wait_job)
from tracebus.jobs import wire

MSGPACK = {"Accept": "application/vnd.msgpack"}
DOMAINS = ["history", "rejects", "holds"]


def ndjson_of(messages) -> bytes:
    """The NDJSON body the binary stream's maps stand for."""
    return b"".join(orjson.dumps(wire.expand(m), option=orjson.OPT_APPEND_NEWLINE) for m in messages)


def records(lines: list[dict]) -> dict[str, list[str]]:
    """The rows of each domain, in stream order, as canonical strings."""
    out: dict[str, list[str]] = {}
    for line in lines:
        if line["type"] == "records":
            out.setdefault(line["domain"], []).extend(canonical(r) for r in line["data"])
    return out


@pytest.fixture(scope="module")
def finished_job(api_settings, api_broker, trace_workers, trace_cids):
    """A completed 3-domain job and its plain NDJSON body."""
    client = make_client(api_settings, api_broker, "wire-reader")
    job = submit(client, trace_cids[:450], DOMAINS)
    wait_job(client, job)
    resp = client.simulate_get(f"/api/trace/job/{job}/stream")
    assert resp.status_code == 200
    return client, job, resp.content


def test_the_binary_stream_carries_the_ndjson_lines_in_a_fraction_of_the_bytes(finished_job):
    client, job, plain = finished_job

    resp = client.simulate_get(f"/api/trace/job/{job}/stream", headers=MSGPACK)

    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/vnd.msgpack"
    assert resp.headers["vary"] == "Accept, Accept-Encoding" and "content-encoding" not in resp.headers
    body = resp.content
    messages = list(wire.read(body[i:i + 1000] for i in range(0, len(body), 1000)))
    assert [m["type"] for m in messages[:2]] == ["meta", "domain_start"] and messages[-1]["type"] == "complete"
    chunks = [m for m in messages if m["type"] == "records"]
    assert len(chunks) > 3 and all(isinstance(m["chunk"], bytes) and m["count"] > 0 for m in chunks)
    assert ndjson_of(messages) == plain
    assert len(body) * 4 < len(plain)


def test_the_reader_gives_the_same_rows_as_the_source(finished_job, sample_db, trace_cids):
    client, job, _ = finished_job
    body = client.simulate_get(f"/api/trace/job/{job}/stream", headers=MSGPACK).content
    rows: dict[str, list] = {}
    for message in wire.read([body]):
        if message["type"] == "records":
            columns, chunk_rows = wire.rows_of(message)
            assert len(chunk_rows) == message["count"]
            rows.setdefault(message["domain"], []).extend(dict(zip(columns, r)) for r in chunk_rows)
    for domain in DOMAINS:
        assert sorted(canonical(r) for r in rows[domain]) == sorted(source_rows(sample_db, domain,
                                                                                trace_cids[:450]).elements())


def test_gzip_decompresses_to_the_identical_ndjson_bytes(finished_job):
    client, job, plain = finished_job

    resp = client.simulate_get(f"/api/trace/job/{job}/stream", headers={"Accept-Encoding": "gzip, deflate"})

    assert resp.status_code == 200 and resp.headers["content-encoding"] == "gzip"
    assert resp.headers["content-type"] == "application/x-ndjson"
    assert gzip.decompress(resp.content) == plain
    assert len(resp.content) * 5 < len(plain)


def test_zstd_is_used_when_offered_and_decompresses_to_the_same_bytes(finished_job):
    zstandard = pytest.importorskip("zstandard")
    client, job, plain = finished_job

    resp = client.simulate_get(f"/api/trace/job/{job}/stream", headers={"Accept-Encoding": "gzip, zstd"})

    assert resp.headers["content-encoding"] == "zstd"
    reader = zstandard.ZstdDecompressor().stream_reader(resp.content)
    assert reader.read() == plain


@pytest.mark.parametrize("headers", [
    {}, {"Accept": "*/*"}, {"Accept": "application/x-ndjson, application/vnd.msgpack;q=0.5"},
    {"Accept-Encoding": "identity"}, {"Accept-Encoding": "gzip;q=0, br"}, {"Accept-Encoding": "gzip;q=bad"},
])
def test_without_a_preference_for_them_the_stream_stays_plain_ndjson(finished_job, headers):
    client, job, plain = finished_job

    resp = client.simulate_get(f"/api/trace/job/{job}/stream", headers=headers)

    assert resp.status_code == 200 and resp.headers["content-type"] == "application/x-ndjson"
    assert "content-encoding" not in resp.headers and resp.content == plain


@pytest.mark.parametrize("headers", [{}, MSGPACK, {"Accept-Encoding": "gzip"}])
def test_following_from_right_after_the_202_yields_exactly_the_completed_rows(client, trace_cids, headers):
    job = submit(client, trace_cids[:600], DOMAINS)

    resp = client.simulate_get(f"/api/trace/job/{job}/stream", params={"follow": "1"}, headers=headers)

    assert resp.status_code == 200
    if headers is MSGPACK:
        followed = [wire.expand(m) for m in wire.read([resp.content])]
    else:
        body = gzip.decompress(resp.content) if headers else resp.content
        followed = [json.loads(x) for x in body.splitlines()]
    assert client.simulate_get(f"/api/trace/job/{job}").json["status"] == "completed"  # it ended with the job
    done = [json.loads(x) for x in client.simulate_get(f"/api/trace/job/{job}/stream").content.splitlines()]
    assert records(followed) == records(done) and set(records(done)) == set(DOMAINS)
    assert followed[0] == done[0] and followed[-1] == done[-1]
    batches = [(x["domain"], x["batch"], x["count"]) for x in followed if x["type"] == "records"]
    assert batches == [(x["domain"], x["batch"], x["count"]) for x in done if x["type"] == "records"]
    ends = [x for x in followed if x["type"] == "domain_end"]
    assert ends == [x for x in done if x["type"] == "domain_end"]
    assert all(x["total"] in (None, y["total"]) for x, y in zip(
        (x for x in followed if x["type"] == "domain_start"), (y for y in done if y["type"] == "domain_start")))


def test_following_a_job_that_is_cancelled_ends_with_an_error_line(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])
    canceller = threading.Timer(1.0, lambda: idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel"))
    canceller.start()
    try:
        resp = idle_client.simulate_get(f"/api/trace/job/{job}/stream", params={"follow": "true"})
    finally:
        canceller.cancel()

    lines = [json.loads(x) for x in resp.content.splitlines()]
    assert [x["type"] for x in lines] == ["meta", "domain_start", "error"]
    assert lines[1]["total"] is None
    assert lines[-1]["code"] == "JOB_CANCELLED" and lines[-1]["message"]


def test_a_follow_stream_ends_at_the_job_time_limit(api_settings, api_broker, user, trace_cids):
    idle = make_client(api_settings, api_broker, user, queue="idle-queue", job_timeout_s=1)
    job = submit(idle, trace_cids[:300])

    resp = idle.simulate_get(f"/api/trace/job/{job}/stream", params={"follow": "1"}, headers=MSGPACK)

    messages = list(wire.read([resp.content]))
    assert [m["type"] for m in messages] == ["meta", "domain_start", "error"]
    assert messages[-1]["code"] == "FOLLOW_TIMEOUT"
    idle.simulate_post(f"/api/v1/jobs/{job}/cancel")


def test_without_follow_a_running_job_is_still_409_and_bad_follow_values_are_400(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])

    running = idle_client.simulate_get(f"/api/trace/job/{job}/stream", headers=MSGPACK)
    bad = idle_client.simulate_get(f"/api/trace/job/{job}/stream", params={"follow": "maybe"})
    missing = idle_client.simulate_get("/api/trace/job/trace-000000000000000000000000/stream",
                                       params={"follow": "1"}, headers=MSGPACK)

    assert running.status_code == 409 and running.json["error"]["code"] == "JOB_NOT_COMPLETE"
    assert bad.status_code == 400 and "follow" in bad.json["error"]["message"]
    assert missing.status_code == 404 and missing.json["error"]["code"] == "JOB_NOT_FOUND"
    idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel")


def test_the_javascript_example_decodes_the_binary_stream_to_the_ndjson_lines(finished_job, tmp_path):
    """examples/wire_js/read_stream.mjs with @msgpack/msgpack (needs node and `npm install` there)."""
    import shutil
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "wire_js"
    if shutil.which("node") is None or not (example / "node_modules" / "@msgpack" / "msgpack").is_dir():
        pytest.skip("node, or the example's npm install, is missing")
    client, job, plain = finished_job
    saved = tmp_path / "body.msgpack"
    saved.write_bytes(client.simulate_get(f"/api/trace/job/{job}/stream", headers=MSGPACK).content)

    run = subprocess.run(["node", "read_stream.mjs", "--file", str(saved)], cwd=example, capture_output=True,
                         timeout=60)

    assert run.returncode == 0, run.stderr.decode()
    assert [json.loads(x) for x in run.stdout.splitlines()] == [json.loads(x) for x in plain.splitlines()]


def test_the_full_result_followed_from_the_202_is_the_completed_document(client, trace_cids):
    job = submit(client, trace_cids[:600], DOMAINS)

    followed = client.simulate_get(f"/api/trace/job/{job}/result", params={"follow": "1"})
    holds = client.simulate_get(f"/api/trace/job/{job}/result", params={"follow": "1", "domain": "holds",
                                                                        "limit": "0", "offset": "2"})

    assert followed.status_code == 200 and client.simulate_get(f"/api/trace/job/{job}").json["status"] == "completed"
    done = client.simulate_get(f"/api/trace/job/{job}/result")
    assert followed.json == done.json and sum(r["total"] for r in done.json["results"].values()) > 0
    assert holds.json == client.simulate_get(f"/api/trace/job/{job}/result",
                                               params={"domain": "holds", "limit": "0", "offset": "2"}).json


def test_a_followed_full_result_of_a_cancelled_job_is_a_whole_document_saying_so(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300], ["history", "holds"])
    canceller = threading.Timer(1.0, lambda: idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel"))
    canceller.start()
    try:
        doc = idle_client.simulate_get(f"/api/trace/job/{job}/result", params={"follow": "1"}).json
    finally:
        canceller.cancel()

    assert doc["code"] == "JOB_CANCELLED" and doc["error"]
    assert doc["results"] == {"history": {"data": [], "count": 0, "total": 0, "quality_meta": {
        "status": "failed", "scope": "domain", "reasons": ["domain_fetch_failed"], "domain": "history"}}}


def test_a_read_ahead_body_passes_its_error_after_its_pieces_and_stops_when_closed():
    from api.encodings import ahead

    def failing():
        yield b"a"
        yield b"b"
        raise ValueError("chunk gone")

    got = []
    with pytest.raises(ValueError, match="chunk gone"):
        for piece in ahead(failing(), 1):
            got.append(piece)
    assert got == [b"a", b"b"]

    closed = threading.Event()

    def endless():
        try:
            while True:
                yield b"x"
        finally:
            closed.set()

    reader = ahead(endless(), 2)
    assert next(reader) == b"x"
    reader.close()  # the client went away
    assert closed.wait(5)
