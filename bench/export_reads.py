"""Results for data tools (issue 28, item 3; issue 39, item 3): the ``history`` domain of the 114K
trace as a Parquet export and as an Arrow export, against its stored msgpack chunks, its msgpack
stream and its NDJSON stream.

Measured client side on the same completed job, :data:`ROUNDS` rounds interleaved (median):

* **Parquet and Arrow exports**: ``GET /api/v1/jobs/{id}/export?domain=history&format=parquet``
  (and ``format=arrow``) read off the socket (bytes, seconds), API RSS sampled against its idle
  RSS (idle: after small exports of ``holds`` have imported pyarrow in the API workers);
* **msgpack stream of the domain**: ``/stream`` with ``Accept: application/vnd.msgpack``, from the
  request to the ``domain_end`` of ``history`` (the first domain; the read stops there);
* **stored bytes**: STRLEN of the domain's chunk keys;
* **DataFrame load**: from the request to a pandas DataFrame of the domain: the Parquet body
  through ``pyarrow.parquet.read_table(...).to_pandas()``, the Arrow body through
  ``pyarrow.ipc.open_stream(...).read_all().to_pandas()``, against the NDJSON ``/stream`` with
  ``json.loads`` of every line up to ``domain_end`` of history and ``pandas.DataFrame`` of its rows.

Which workers wrote the job (default settings, or with ``TRACEBUS_COLUMNAR_COPY=1``) is the
scenario's choice; :func:`report` names it.
"""

from __future__ import annotations

import io
import json
import os
import time

from bench import trace_support as ts
from bench.wire_reads import MSGPACK, READ_BYTES, _sampled

ROUNDS = 3
DOMAIN = "history"
#: Stored chunks whose columnar copy is timed again client side (:func:`copy_cost`).
COPY_SAMPLES = 24


def _body(system: ts.System, path: str, headers: dict, until=None) -> tuple[float, bytes | list, int]:
    """(seconds, the body or what ``until`` collected, bytes read): the body is read off the
    socket; ``until(block) -> bool`` may stop the read early."""
    conn = system.conn(timeout=1200)
    t0, parts, n = time.perf_counter(), [], 0
    try:
        conn.request("GET", path, headers={"X-User-Id": ts.USER, **headers})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}: {resp.read()[:300]!r}")
        while block := resp.read1(READ_BYTES):
            n += len(block)
            if until is not None:
                if until(block):
                    break
            else:
                parts.append(block)
    finally:
        conn.close()
    return time.perf_counter() - t0, b"".join(parts), n


def _msgpack_domain(system: ts.System, job_id: str) -> dict:
    from tracebus.jobs import wire

    reader, seen = wire.FrameReader(), {"rows": 0, "done": False}

    def until(block: bytes) -> bool:
        for message in reader.feed(block):
            if message["type"] == "records" and message["domain"] == DOMAIN:
                seen["rows"] += message["count"]
            elif message["type"] == "domain_end" and message["domain"] == DOMAIN:
                seen["done"] = True
                return True
        return False

    seconds, _, n = _body(system, f"/api/trace/job/{job_id}/stream", {"Accept": MSGPACK}, until)
    assert seen["done"], "the msgpack stream ended before history's domain_end"
    return {"seconds": seconds, "wire_bytes": n, "rows": seen["rows"]}


def _parquet(system: ts.System, job_id: str) -> dict:
    import pyarrow.parquet as pq

    seconds, body, n = _body(system, f"/api/v1/jobs/{job_id}/export?domain={DOMAIN}&format=parquet", {})
    t0 = time.perf_counter()
    frame = pq.read_table(io.BytesIO(body)).to_pandas()
    load = time.perf_counter() - t0
    return {"seconds": seconds, "bytes": n, "rows": len(frame), "dataframe_s": seconds + load,
            "row_groups": pq.ParquetFile(io.BytesIO(body)).metadata.num_row_groups,
            "columns": {k: str(v) for k, v in frame.dtypes.items()}}


def _arrow(system: ts.System, job_id: str) -> dict:
    import pyarrow as pa
    import pyarrow.ipc  # noqa: F401

    seconds, body, n = _body(system, f"/api/v1/jobs/{job_id}/export?domain={DOMAIN}&format=arrow", {})
    t0 = time.perf_counter()
    frame = pa.ipc.open_stream(body).read_all().to_pandas()
    load = time.perf_counter() - t0
    return {"seconds": seconds, "bytes": n, "rows": len(frame), "dataframe_s": seconds + load}


def _ndjson_frame(system: ts.System, job_id: str) -> dict:
    import pandas

    rows, buffer, state = [], [b""], {"done": False}

    def until(block: bytes) -> bool:
        lines = (buffer[0] + block).split(b"\n")
        buffer[0] = lines.pop()
        for line in lines:
            doc = json.loads(line)
            if doc.get("type") == "records" and doc.get("domain") == DOMAIN:
                rows.extend(doc["data"])
            elif doc.get("type") == "domain_end" and doc.get("domain") == DOMAIN:
                state["done"] = True
                return True
        return False

    t0 = time.perf_counter()
    seconds, _, n = _body(system, f"/api/trace/job/{job_id}/stream", {}, until)
    frame = pandas.DataFrame(rows)
    total = time.perf_counter() - t0
    assert state["done"], "the NDJSON stream ended before history's domain_end"
    return {"seconds": seconds, "dataframe_s": total, "rows": len(frame), "wire_bytes": n}


def _stored_bytes(system: ts.System, job_id: str) -> tuple[int, int, int, int]:
    """(STRLEN, keys) of the domain's msgpack chunks, then of their columnar copies."""
    pattern = f"*:job:{{{job_id}:{DOMAIN}:*"
    per_node = [ts.redis_result_bytes(c, pattern) for c in system.node_clients()]
    _, copies, copy_keys = ts.copy_bytes(system, job_id, DOMAIN)
    return (sum(n[1] for n in per_node) - copies, sum(n[2] for n in per_node) - copy_keys, copies, copy_keys)


def copy_cost(system: ts.System, job_id: str, samples: int = COPY_SAMPLES) -> dict:
    """What a worker pays per chunk for its columnar copy: CPU ms of
    :func:`tracebus.jobs.columnar.encode` on ``samples`` of the domain's stored chunks (read back
    and decoded here, spread over the domain), against the msgpack encode of the same rows."""
    from tracebus.jobs import columnar
    from tracebus.jobs.chunkcodec import decode_chunk, encode_chunk
    from tracebus.trace import coltypes

    client = system.node_clients()[0]
    pattern = f"*:job:{{{job_id}:{DOMAIN}:*"
    keys = sorted(k for k in client.scan_iter(match=pattern, count=1000) if not k.endswith(ts.COPY_SUFFIX.encode()))
    step = max(1, len(keys) // samples)
    types = coltypes.types_of(DOMAIN)
    columnar.encode(*decode_chunk(client.get(keys[0])), types)  # pyarrow's first use (once per process)
    copy_ms, msgpack_ms, rows = [], [], 0
    for key in keys[::step][:samples]:
        cols, chunk = decode_chunk(client.get(key))
        t0 = time.process_time()
        columnar.encode(cols, chunk, types)
        copy_ms.append((time.process_time() - t0) * 1000)
        t0 = time.process_time()
        encode_chunk(cols, chunk)
        msgpack_ms.append((time.process_time() - t0) * 1000)
        rows += len(chunk)
    copy_ms.sort()
    msgpack_ms.sort()
    return {"chunks": len(copy_ms), "rows": rows, "copy_ms_median": copy_ms[len(copy_ms) // 2],
            "copy_ms_max": copy_ms[-1], "msgpack_ms_median": msgpack_ms[len(msgpack_ms) // 2]}


def reads(ctx, system: ts.System, job_id: str, rounds: int = ROUNDS) -> dict:
    """The export measurements of a completed job (see the module docstring)."""
    stored, keys, copies, copy_keys = _stored_bytes(system, job_id)
    cost = copy_cost(system, job_id)
    ctx.step(f"columnar copies of {DOMAIN}: {copies / ts.MB:,.1f} MB in {copy_keys} keys next to "
             f"{stored / ts.MB:,.1f} MB of msgpack in {keys}; encode {cost['copy_ms_median']:.1f} ms CPU per chunk "
             f"(median of {cost['chunks']}; msgpack encode {cost['msgpack_ms_median']:.1f} ms)")
    # pyarrow is imported by a process's first export (~100 MB of library, once): idle is the
    # API after a small export has loaded it in every worker, so the growth measured is the export's.
    for _ in range(4):
        _body(system, f"/api/v1/jobs/{job_id}/export?domain=holds&format=parquet", {})
    idle = ts._api_rss_max(system)
    got: dict[str, list] = {"parquet": [], "arrow": [], "msgpack": [], "ndjson": []}
    for r in range(rounds):
        got["parquet"].append(_sampled(system, lambda: _parquet(system, job_id)))
        got["arrow"].append(_sampled(system, lambda: _arrow(system, job_id)))
        got["msgpack"].append(_msgpack_domain(system, job_id))
        got["ndjson"].append(_ndjson_frame(system, job_id))
        p, a, m, j = (got[k][-1] for k in ("parquet", "arrow", "msgpack", "ndjson"))
        ctx.step(f"export round {r + 1}/{rounds}: parquet {p['bytes'] / ts.MB:,.1f} MB in {p['seconds']:.2f} s "
                 f"(DataFrame {p['dataframe_s']:.2f} s, API RSS peak {p['api_rss_peak_mb']:.0f} MB), arrow "
                 f"{a['bytes'] / ts.MB:,.1f} MB in {a['seconds']:.2f} s (DataFrame {a['dataframe_s']:.2f} s), msgpack "
                 f"history {m['seconds']:.2f} s, NDJSON DataFrame {j['dataframe_s']:.2f} s; load average "
                 f"{os.getloadavg()[0]:.1f}")

    def median(name: str, key: str) -> float:
        values = sorted(x[key] for x in got[name])
        return values[len(values) // 2]

    out = {"rounds": got, "stored_bytes": stored, "stored_keys": keys, "api_rss_idle_mb": idle,
           "copy_bytes": copies, "copy_keys": copy_keys, "copy_cost": cost,
           "parquet_bytes": got["parquet"][0]["bytes"], "parquet_s": median("parquet", "seconds"),
           "msgpack_s": median("msgpack", "seconds"), "parquet_frame_s": median("parquet", "dataframe_s"),
           "ndjson_frame_s": median("ndjson", "dataframe_s"),
           "arrow_bytes": got["arrow"][0]["bytes"], "arrow_s": median("arrow", "seconds"),
           "arrow_frame_s": median("arrow", "dataframe_s"),
           "api_rss_peak_mb": max(x["api_rss_peak_mb"] for x in got["parquet"] + got["arrow"]),
           "load_average": os.getloadavg(),
           "rows": got["parquet"][0]["rows"], "same_rows": len({x["rows"] for x in got["parquet"] + got["arrow"]
                                                                 + got["msgpack"] + got["ndjson"]}) == 1,
           "row_groups": got["parquet"][0]["row_groups"], "columns": got["parquet"][0]["columns"]}
    out["bytes_ratio"] = out["parquet_bytes"] / stored
    out["time_ratio"] = out["parquet_s"] / out["msgpack_s"]
    out["frame_speedup"] = out["ndjson_frame_s"] / out["parquet_frame_s"]
    out["arrow_time_ratio"] = out["arrow_s"] / out["msgpack_s"]
    out["arrow_frame_speedup"] = out["ndjson_frame_s"] / out["arrow_frame_s"]
    out["api_rss_growth_mb"] = out["api_rss_peak_mb"] - idle
    ctx.step(f"export: history {out['rows']:,} rows; parquet {out['parquet_bytes'] / ts.MB:,.1f} MB = "
             f"{out['bytes_ratio']:.2f}x the stored {stored / ts.MB:,.1f} MB; {out['parquet_s']:.2f} s = "
             f"{out['time_ratio']:.2f}x the msgpack stream's {out['msgpack_s']:.2f} s; arrow {out['arrow_s']:.2f} s = "
             f"{out['arrow_time_ratio']:.2f}x; API RSS +{out['api_rss_growth_mb']:.0f} MB over idle {idle:.0f} MB; "
             f"DataFrame parquet {out['parquet_frame_s']:.2f} s ({out['frame_speedup']:.1f}x), arrow "
             f"{out['arrow_frame_s']:.2f} s ({out['arrow_frame_speedup']:.1f}x) vs NDJSON {out['ndjson_frame_s']:.2f} s")
    return out


def report(runs: list[dict], targets: list, tables: list, label: str = "default settings") -> None:
    """The issue 28 and issue 39 (item 3) targets and a table, from the last round; ``label``
    says which workers wrote the job."""
    if not runs:
        return
    e = runs[-1]
    mb = ts.MB
    load = "load average " + " / ".join(f"{x:.1f}" for x in e.get("load_average", ()))
    targets += [
        {"name": f"Parquet of history, {label}: bytes vs its stored msgpack chunks (issue 28)", "target": "<= 0.5x",
         "measured": f"{e['bytes_ratio']:.2f}x ({e['parquet_bytes'] / mb:,.1f} MB vs {e['stored_bytes'] / mb:,.1f} MB; "
                     f"{e['rows']:,} rows, {e['row_groups']} row groups)", "met": e["bytes_ratio"] <= 0.5},
        {"name": f"Parquet of history, {label}: time vs its msgpack stream (issues 28, 39)", "target": "<= 2x",
         "measured": f"{e['time_ratio']:.2f}x ({e['parquet_s']:.2f} s vs {e['msgpack_s']:.2f} s; {load})",
         "met": e["time_ratio"] <= 2},
        {"name": f"Arrow of history, {label}: time vs its msgpack stream (issue 39)", "target": "<= 2x",
         "measured": f"{e['arrow_time_ratio']:.2f}x ({e['arrow_s']:.2f} s vs {e['msgpack_s']:.2f} s, "
                     f"{e['arrow_bytes'] / mb:,.0f} MB)", "met": e["arrow_time_ratio"] <= 2},
        {"name": f"API RSS during the exports vs idle, {label} (issue 28)", "target": "<= 100 MB",
         "measured": f"{e['api_rss_growth_mb']:+.0f} MB (idle {e['api_rss_idle_mb']:.0f} MB)",
         "met": e["api_rss_growth_mb"] <= 100},
        {"name": f"history into a DataFrame, {label}: Parquet export vs NDJSON stream (issues 28, 39)",
         "target": ">= 10x faster",
         "measured": f"{e['frame_speedup']:.1f}x ({e['parquet_frame_s']:.2f} s vs {e['ndjson_frame_s']:.2f} s)",
         "met": e["frame_speedup"] >= 10},
        {"name": f"history into a DataFrame, {label}: Arrow export vs NDJSON stream (issue 39)",
         "target": ">= 10x faster",
         "measured": f"{e['arrow_frame_speedup']:.1f}x ({e['arrow_frame_s']:.2f} s vs {e['ndjson_frame_s']:.2f} s)",
         "met": e["arrow_frame_speedup"] >= 10},
    ]
    tables.append({"title": f"The history domain for data tools, {label} (client side, median of the rounds; {load})",
                   "columns": ["read", "MB", "seconds"], "rows": [
                       ["stored msgpack chunks (STRLEN)", f"{e['stored_bytes'] / mb:,.1f}", "-"],
                       [f"their columnar copies (STRLEN, {e['copy_keys']} keys)", f"{e['copy_bytes'] / mb:,.1f}", "-"],
                       ["Parquet export, off the socket", f"{e['parquet_bytes'] / mb:,.1f}", f"{e['parquet_s']:.2f}"],
                       ["Arrow export, off the socket", f"{e['arrow_bytes'] / mb:,.1f}", f"{e['arrow_s']:.2f}"],
                       ["msgpack /stream up to history's domain_end", "-", f"{e['msgpack_s']:.2f}"],
                       ["DataFrame: Parquet export + read_table().to_pandas()", "-", f"{e['parquet_frame_s']:.2f}"],
                       ["DataFrame: Arrow export + open_stream().read_all().to_pandas()", "-",
                        f"{e['arrow_frame_s']:.2f}"],
                       ["DataFrame: NDJSON /stream, json.loads per line, DataFrame(rows)", "-",
                        f"{e['ndjson_frame_s']:.2f}"]]})
