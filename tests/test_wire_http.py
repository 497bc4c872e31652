"""``/stream`` over a real socket: gunicorn, the worker supervisor and redis-server as processes.

A followed stream must deliver rows while the job still runs (the download overlaps the job)
and end with the job; the binary and gzip bodies must arrive whole through gunicorn's chunked
transfer encoding; an MSD job followed from its 202 must give the same lines as its stream
read once it finished.
"""

from __future__ import annotations

import gzip
import http.client
import json
import time
import zlib

import orjson
import pytest

from tests.api_support import canonical
from tests.test_e2e_http import System, call
from tests.test_msd_e2e_http import WINDOW, _seeds
from tracebus.jobs import wire
from tracebus.trace.synth import cids

DOMAINS = ["history", "holds", "jobs"]


@pytest.fixture(scope="module")
def wire_system(sample_db, tmp_path_factory):
    running = System(tmp_path_factory.mktemp("wire-http"), sample_db, TRACE_ASYNC_CID_THRESHOLD="100",
                     TRACE_CHUNK_CIDS="60", TRACE_STREAM_BATCH_SIZE="300")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def _post(system: System, body: dict) -> dict:
    with call("POST", f"{system.base_url}/api/trace/events", body) as resp:
        assert resp.status == 202
        return json.loads(resp.read())


def _open(system: System, path: str, **headers) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", system.port, timeout=60)
    conn.request("GET", path, headers={"X-User-Id": "e2e", **headers})
    return conn.getresponse()


def _status(system: System, job_id: str) -> dict:
    with call("GET", f"{system.base_url}/api/trace/job/{job_id}") as resp:
        return json.loads(resp.read())


def test_a_followed_binary_stream_sends_rows_while_the_job_runs_and_ends_with_it(wire_system, sample_db):
    accepted = _post(wire_system, {"profile": "query_tool", "container_ids": cids(sample_db), "domains": DOMAINS})
    job = accepted["job_id"]

    resp = _open(wire_system, f"{accepted['stream_url']}?follow=1", Accept="application/vnd.msgpack")
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/vnd.msgpack"
    assert resp.getheader("Transfer-Encoding") == "chunked"
    reader, messages, running_at_first_rows = wire.FrameReader(), [], None
    while block := resp.read1(65536):
        for message in reader.feed(block):
            if message["type"] == "records" and running_at_first_rows is None:
                running_at_first_rows = _status(wire_system, job)["status"] == "running"
            messages.append(message)
    reader.close()
    ended = time.time()

    assert running_at_first_rows is True
    done = _status(wire_system, job)
    assert done["status"] == "completed" and done["finished_at"] <= ended
    plain = _open(wire_system, accepted["stream_url"]).read()
    followed = b"".join(orjson.dumps(wire.expand(m), option=orjson.OPT_APPEND_NEWLINE)
                        for m in messages if m["type"] == "records")
    assert followed == b"".join(x + b"\n" for x in plain.splitlines() if x.startswith(b'{"type":"records"'))
    assert messages[-1] == {"type": "complete", "total_records": json.loads(plain.splitlines()[-1])["total_records"]}


def test_gzip_over_the_socket_decompresses_line_by_line_to_the_plain_bytes(wire_system, sample_db):
    accepted = _post(wire_system, {"profile": "query_tool", "container_ids": cids(sample_db)[:700],
                                   "domains": ["history"]})

    resp = _open(wire_system, f"{accepted['stream_url']}?follow=1", **{"Accept-Encoding": "gzip"})
    assert resp.getheader("Content-Encoding") == "gzip" and resp.getheader("Vary") == "Accept, Accept-Encoding"
    inflate, lines, pending = zlib.decompressobj(31), [], b""
    while block := resp.read1(65536):
        pending += inflate.decompress(block)
        *whole, pending = pending.split(b"\n")
        lines += whole  # every flushed piece decodes at once: no line waits for the end
    assert inflate.eof and pending == b""

    plain = _open(wire_system, accepted["stream_url"]).read()
    assert gzip.decompress(_open(wire_system, accepted["stream_url"], **{"Accept-Encoding": "gzip"}).read()) == plain
    got = [json.loads(x) for x in lines]
    want = [json.loads(x) for x in plain.splitlines()]
    assert [canonical(r) for x in got if x["type"] == "records" for r in x["data"]] == [
        canonical(r) for x in want if x["type"] == "records" for r in x["data"]]
    assert got[-1] == want[-1]


def test_an_msd_job_followed_from_its_202_gives_the_lines_of_its_finished_stream(wire_system, sample_db):
    seeds = _seeds(sample_db)
    accepted = _post(wire_system, {
        "profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
        "domains": ["upstream_history", "materials"], "cache_key": "wire",
        "params": {"station": "測試", "direction": "backward", "start_date": WINDOW[0], "end_date": WINDOW[1]}})

    followed = _open(wire_system, f"{accepted['stream_url']}?follow=1").read()

    assert _status(wire_system, accepted["job_id"])["status"] == "completed"  # MSD: sent once the job ended
    finished = _open(wire_system, accepted["stream_url"]).read()
    kinds = [json.loads(x)["type"] for x in followed.splitlines()]
    assert kinds[0] == "meta" and "aggregation" in kinds and kinds[-1] == "complete"
    assert followed == finished
