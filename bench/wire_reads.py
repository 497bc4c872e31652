"""The result on the wire (issue 14): ``/stream`` as NDJSON, gzip'd NDJSON and msgpack, and in
follow mode from right after the 202.

Each kind of read runs :data:`ROUNDS` times, interleaved. Each read is a client that takes the body off the socket as fast as it comes (256 KiB reads,
SHA-256 of what it got, no parsing: the cost measured is the server's and the wire's); the
gzip client also inflates (ISA-L, as a browser's native inflate would be), and must end with
the same SHA-256 as the plain NDJSON. The
msgpack body is then decoded with the library's reader and digested row by row, which must
give the digest of the NDJSON read. API RSS is sampled during every read.

Follow mode: a second job with the same CIDs; the client GETs ``/stream?follow=1`` (msgpack)
right after the 202 and notes when the last ``records`` map arrived; the job's own
completion time is its ``finished_at - created_at`` (server clock, from the status).
"""

from __future__ import annotations

import hashlib
import json
import time

from isal import isal_zlib  # the client inflates with ISA-L too (zlib's inflate is ~3x slower)

from bench import trace_support as ts
from bench.common import RssSampler

READ_BYTES = 256 * 1024
#: Reads of each kind, interleaved (the machine is shared: a median of three, same conditions).
ROUNDS = 3
MSGPACK = "application/vnd.msgpack"


def _read(system: ts.System, path: str, headers: dict, inflate: bool = False, on_block=None) -> dict:
    conn = system.conn(timeout=1200)
    sha, wire_bytes, body_bytes = hashlib.sha256(), 0, 0
    inflater = isal_zlib.decompressobj(31) if inflate else None
    t0 = time.perf_counter()
    try:
        conn.request("GET", path, headers={"X-User-Id": ts.USER, **headers})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}: {resp.read()[:300]!r}")
        while block := resp.read1(READ_BYTES):
            wire_bytes += len(block)
            if on_block is not None:
                on_block(block)
            if inflater is not None:
                block = inflater.decompress(block)
            body_bytes += len(block)
            sha.update(block)
    finally:
        conn.close()
    return {"seconds": time.perf_counter() - t0, "wire_bytes": wire_bytes, "body_bytes": body_bytes,
            "sha256": sha.hexdigest(), "content_encoding": resp.getheader("Content-Encoding"),
            "content_type": resp.getheader("Content-Type")}


def _sampled(system: ts.System, fn):
    sampler = RssSampler(0.1)
    sampler.add("API", system.api_processes)
    with sampler:
        out = fn()
    out["api_rss_peak_mb"] = sampler.peaks_mb()["API"]
    return out


def reads(ctx, system: ts.System, job_id: str, ndjson_digest: str, rounds: int = ROUNDS) -> dict:
    """Plain, gzip and msgpack reads of a completed job's ``/stream`` (``rounds`` of each,
    interleaved, so that load from elsewhere hits them alike; the median is reported), and the
    digest of the msgpack rows."""
    from tracebus.jobs import wire

    path = f"/api/trace/job/{job_id}/stream"
    idle = ts._api_rss_max(system)
    out: dict = {"api_rss_idle_mb": idle, "rounds": {"ndjson": [], "gzip": [], "msgpack": []}}
    blocks: list[bytes] = []
    for r in range(rounds):
        got = out["rounds"]
        got["ndjson"].append(_sampled(system, lambda: _read(system, path, {})))
        got["gzip"].append(_sampled(system, lambda: _read(system, path, {"Accept-Encoding": "gzip"}, inflate=True)))
        keep = blocks.append if r == 0 else None
        got["msgpack"].append(_sampled(system, lambda: _read(system, path, {"Accept": MSGPACK}, on_block=keep)))
        ctx.step(f"wire round {r + 1}/{rounds}: " + ", ".join(
            f"{name} {got[name][-1]['wire_bytes'] / ts.MB:,.1f} MB in {got[name][-1]['seconds']:.2f} s"
            for name in got))
    for name, runs in out["rounds"].items():
        median = sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2]
        out[name] = {**median, "all_seconds": [round(x["seconds"], 2) for x in runs],
                     "api_rss_peak_mb": max(x["api_rss_peak_mb"] for x in runs)}
        r = out[name]
        ctx.step(f"wire: {name} {r['wire_bytes'] / ts.MB:,.1f} MB on the wire, median {r['seconds']:.2f} s of "
                 f"{r['all_seconds']} ({r['content_type']}, {r['content_encoding'] or 'identity'}); "
                 f"API RSS peak {r['api_rss_peak_mb']:.0f} MB")
    out["gzip_identical"] = all(x["sha256"] == out["ndjson"]["sha256"] for x in out["rounds"]["gzip"] + out["rounds"]["ndjson"])
    t0 = time.perf_counter()
    digest, total = ts.RowDigest(), None
    for message in wire.read(blocks):
        if message["type"] == "records":
            digest.add(message["domain"], wire.rows_of(message)[1])
        elif message["type"] == "complete":
            total = message["total_records"]
    blocks.clear()
    out["msgpack_decode_s"] = time.perf_counter() - t0
    out["msgpack_digest"] = digest.hexdigest()
    out["msgpack_same_rows"] = digest.hexdigest() == ndjson_digest and total == digest.rows
    ctx.step(f"wire: msgpack decoded and digested in {out['msgpack_decode_s']:.1f} s; same rows as NDJSON: "
             f"{out['msgpack_same_rows']}; gzip inflates to the same bytes: {out['gzip_identical']}")
    return out


def follow(ctx, system: ts.System, cids: list[str]) -> dict:
    """A new job followed (msgpack) from right after its 202."""
    from tracebus.jobs import wire

    t_submit = time.perf_counter()
    job_id, t202, _ = ts.submit(system, cids)
    reader, state = wire.FrameReader(), {"last_rows_at": None, "first_rows_at": None, "rows": 0, "end": None}

    def on_block(block: bytes) -> None:
        for message in reader.feed(block):
            if message["type"] == "records":
                now = time.perf_counter()
                state["first_rows_at"] = state["first_rows_at"] or now
                state["last_rows_at"] = now
                state["rows"] += message["count"]
            elif message["type"] in ("complete", "error"):
                state["end"] = message

    read = _sampled(system, lambda: _read(system, f"/api/trace/job/{job_id}/stream?follow=1", {"Accept": MSGPACK},
                                          on_block=on_block))
    status = json.loads(system.http("GET", f"/api/trace/job/{job_id}")[1])
    job_s = status["finished_at"] - status["created_at"]
    last_row_s = state["last_rows_at"] - t_submit
    out = {"job_id": job_id, "submit_s": t202, "job_s": job_s, "last_row_s": last_row_s,
           "first_row_s": state["first_rows_at"] - t_submit, "stream_end_s": read["seconds"] + t202,
           "rows": state["rows"], "end": state["end"], "state": status["state"], "ratio": last_row_s / job_s,
           "wire_bytes": read["wire_bytes"], "api_rss_peak_mb": read["api_rss_peak_mb"]}
    ctx.step(f"follow: job {status['state']} in {job_s:.1f} s (server clock); first row after "
             f"{out['first_row_s']:.1f} s, last row after {last_row_s:.1f} s ({out['ratio']:.3f}x), "
             f"{state['rows']:,} rows, end {state['end']}")
    return out
