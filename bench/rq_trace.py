"""The peers of the trace scenarios: the original design as RQ jobs, and the plain SQLite read.

* :func:`original_job` -- the original dashboard's trace worker (DOMAIN.md sections 2-4):
  one RQ job fetches every domain into memory, domains in a 2-thread pool and CID batches
  of 1,000 in a 2-thread pool per domain, each row a ``dict(zip(cols, row))`` appended to
  ``grouped[CONTAINERID]`` (rows without a CID dropped), then flattened into
  ``{"stage", "results": {domain: {"data", "count"}}, "aggregation"}``, serialised with
  ``json.dumps`` and stored as one value with SETEX (the legacy single-key result).
* :func:`chunked_job` -- the same job writing its result in 5,000-CID chunks instead: per
  domain and 5,000-CID slice, the grouped dicts are flattened and stored as one msgpack
  value, so only one slice is in memory at a time.
* :func:`baseline` -- one process reading the same rows straight from SQLite through the
  same source, no queue, no Redis (issue 3's ratio target).
* :func:`bare` -- the tracebus job's own statements (one per domain and 1,000-CID unit, and
  the jobs domain's one scan of DW_MES_JOB) read by N processes that take the next statement
  as they finish one, rows counted and dropped: what N cores can do with the source alone
  (issue 39's ratios: the job and a client's last byte against it).

All three read through the source the tracebus workers use:
:class:`tracebus.trace.sources.sqlite.SqliteSource`, or with a ``postgresql://`` URL for ``db``
:class:`tracebus.trace.sources.postgres.PostgresSource` (``bench ... --source postgres``). ``python -m bench.rq_trace exec --as-mb N -- CMD...`` caps the address
space (``RLIMIT_AS``) and execs ``CMD`` (the RQ worker): the machine guard and the
memory-limit cap. ``python -m bench.rq_trace baseline DB CIDS_FILE DOMAINS`` and
``python -m bench.rq_trace bare DB CIDS_FILE DOMAINS PROCESSES`` print JSON.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

#: DOMAIN.md section 2: pools of 2 for domains and for batches, IN lists of 1,000.
TRACE_EVENTS_MAX_WORKERS = 2
EVENT_FETCHER_MAX_WORKERS = 2
BATCH_CIDS = 1000
FETCHMANY = 5000
CHUNK_CIDS = 5000
TTL_S = 3600

_local = threading.local()


def open_source(db: str):
    """The workers' source for ``db``: the SQLite file, or the PostgreSQL of a URL."""
    if db.startswith("postgresql://"):
        from tracebus.trace.sources.postgres import PostgresSource

        return PostgresSource(db)
    from tracebus.trace.sources.sqlite import SqliteSource

    return SqliteSource(db)


def _source(db: str):
    src = getattr(_local, "source", None)
    if src is None or getattr(_local, "db", None) != db:
        src = _local.source = open_source(db)  # one connection per thread, as the original's per-query connect
        _local.db = db
    return src


def _cid_index(domain: str) -> int:
    from tracebus.trace import domains

    return domains.COLUMNS[domain].index("CONTAINERID")


def _fetch_batch(db: str, domain: str, cids: list[str]) -> dict[str, list[dict]]:
    """One IN-list batch: fetchmany, dict per row, grouped by CID (the original's per-batch grouping)."""
    grouped: dict[str, list[dict]] = defaultdict(list)
    key = _cid_index(domain)
    for columns, rows in _source(db).fetch(domain, cids, FETCHMANY):
        for row in rows:
            cid = row[key]
            if cid:
                grouped[cid].append(dict(zip(columns, row)))
    return grouped


def fetch_domain(db: str, domain: str, cids: list[str]) -> dict[str, list[dict]]:
    """``EventFetcher.fetch_events`` for one domain: batches in a 2-thread pool, merged per CID."""
    batches = [cids[i:i + BATCH_CIDS] for i in range(0, len(cids), BATCH_CIDS)]
    grouped: dict[str, list[dict]] = defaultdict(list)
    with ThreadPoolExecutor(min(len(batches), EVENT_FETCHER_MAX_WORKERS)) as pool:
        for part in pool.map(lambda b: _fetch_batch(db, domain, b), batches):
            for cid, rows in part.items():
                grouped[cid].extend(rows)
    return grouped


def _flatten(grouped: dict[str, list[dict]]) -> list[dict]:
    return [row for rows in grouped.values() for row in rows]


def _connection():
    """The Redis connection of the running RQ job (rq 2+ has no get_current_connection)."""
    from rq import get_current_job

    return get_current_job().connection


def original_job(db: str, cids: list[str], domains: list[str], result_key: str) -> dict:
    """The original design: every domain in memory, one JSON value in Redis."""
    import redis

    t0 = time.monotonic()
    conn: redis.Redis = _connection()
    results = {}
    with ThreadPoolExecutor(min(len(domains), TRACE_EVENTS_MAX_WORKERS)) as pool:
        grouped_by_domain = dict(zip(domains, pool.map(lambda d: fetch_domain(db, d, cids), domains)))
    for domain in domains:
        data = _flatten(grouped_by_domain.pop(domain))  # non-MSD drops the per-CID dict at once
        results[domain] = {"data": data, "count": len(data)}
    if len(cids) > 10_000:
        gc.collect()
    fetched = time.monotonic() - t0
    payload = json.dumps({"stage": "events", "results": results, "aggregation": None},
                         ensure_ascii=False, separators=(",", ":")).encode()
    rows = sum(r["count"] for r in results.values())
    del results
    conn.setex(result_key, TTL_S, payload)
    return {"rows": rows, "bytes": len(payload), "fetch_s": fetched, "total_s": time.monotonic() - t0}


def chunked_job(db: str, cids: list[str], domains: list[str], key_prefix: str) -> dict:
    """The original fetcher with chunked results: one msgpack value per (domain, 5,000 CIDs)."""
    import msgpack

    t0 = time.monotonic()
    conn = _connection()
    rows = nbytes = chunks = 0
    meta = {}

    def one_domain(domain):
        nonlocal rows, nbytes, chunks
        n_chunks = 0
        for i in range(0, len(cids), CHUNK_CIDS):
            data = _flatten(fetch_domain(db, domain, cids[i:i + CHUNK_CIDS]))
            value = msgpack.packb(data, use_bin_type=True)
            conn.setex(f"{key_prefix}:{domain}:{n_chunks}", TTL_S, value)
            rows += len(data)
            nbytes += len(value)
            n_chunks += 1
            del data, value
        meta[domain] = n_chunks

    with ThreadPoolExecutor(min(len(domains), TRACE_EVENTS_MAX_WORKERS)) as pool:
        list(pool.map(one_domain, domains))
    conn.setex(f"{key_prefix}:meta", TTL_S, json.dumps(meta))
    return {"rows": rows, "bytes": nbytes, "chunks": sum(meta.values()), "total_s": time.monotonic() - t0}


def _own_peak_rss_mb(usage) -> float:
    """This process's peak RSS since its exec (VmHWM). ``ru_maxrss`` carries over the memory of
    the process it was spawned from (Linux keeps the larger high-water mark across exec: a
    baseline started by a bench process of 430 MB reported 458 MB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(usage.ru_maxrss / 1024, 1)


def baseline(db: str, cids: list[str], domains: list[str], digest: bool = False) -> dict:
    """One process, no queue: read every domain's rows for ``cids`` in 1,000-CID IN lists."""
    from bench.trace_support import RowDigest

    src = open_source(db)
    d = RowDigest() if digest else None
    rows = 0
    import resource

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = r0.ru_utime + r0.ru_stime
    t0 = time.perf_counter()
    for domain in domains:
        for i in range(0, len(cids), BATCH_CIDS):
            for _, batch in src.fetch(domain, cids[i:i + BATCH_CIDS], FETCHMANY):
                rows += len(batch)
                if d is not None:
                    d.add(domain, batch)
    seconds = time.perf_counter() - t0
    src.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {"rows": rows, "seconds": seconds, "peak_rss_mb": _own_peak_rss_mb(usage),
           "cpu_s": round(usage.ru_utime + usage.ru_stime - cpu0, 1)}
    if d is not None:
        out["digest"] = d.hexdigest()
        out["per_domain"] = d.per_domain
        out["domain_digests"] = d.domain_digests()
    return out


def _bare_statements(cids: list[str], domains: list[str]) -> list[tuple[str, int]]:
    """The job's statements in its units' order: (domain, first CID) per 1,000-CID unit, and
    ("jobs", -1) for the jobs domain's one scan."""
    out = []
    for domain in domains:
        if domain == "jobs":
            out.append(("jobs", -1))
        else:
            out += [(domain, i) for i in range(0, len(cids), BATCH_CIDS)]
    return out


def _bare_child(db: str, cids: list[str], work: list, next_index, results) -> None:
    import resource
    import traceback

    from tracebus.trace.events.jobs_domain import scan_jobs

    try:
        src = open_source(db)
        rows = statements = 0
        while True:
            with next_index.get_lock():
                i = next_index.value
                next_index.value += 1
            if i >= len(work):
                break
            domain, start = work[i]
            batches = (scan_jobs(src, cids, FETCHMANY) if start < 0
                       else src.fetch(domain, cids[start:start + BATCH_CIDS], FETCHMANY))
            for _, batch in batches:
                rows += len(batch)
            statements += 1
        src.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        results.put({"rows": rows, "statements": statements, "cpu_s": usage.ru_utime + usage.ru_stime,
                     "peak_rss_mb": _own_peak_rss_mb(usage)})
    except BaseException:  # the parent waits for one answer per reader: never leave it waiting
        results.put({"error": traceback.format_exc()})


def bare(db: str, cids: list[str], domains: list[str], processes: int) -> dict:
    """``processes`` forked readers over the job's statements (:func:`_bare_statements`),
    each taking the next one when it finishes one; wall time from the fork to the last reader's end."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    work = _bare_statements(cids, domains)
    next_index, results = ctx.Value("q", 0), ctx.Queue()
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_bare_child, args=(db, cids, work, next_index, results)) for _ in range(processes)]
    for p in procs:
        p.start()
    parts = [results.get() for _ in procs]
    for p in procs:
        p.join()
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        raise RuntimeError(f"a reader failed:\n{errors[0]}")
    seconds = time.perf_counter() - t0
    return {"rows": sum(p["rows"] for p in parts), "seconds": seconds, "processes": processes,
            "statements": len(work), "cpu_s": round(sum(p["cpu_s"] for p in parts), 1),
            "peak_rss_mb": max(p["peak_rss_mb"] for p in parts)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["exec"]:
        # exec --as-mb N -- cmd...
        mb = int(argv[argv.index("--as-mb") + 1])
        cmd = argv[argv.index("--") + 1:]
        if mb > 0:
            from bench.trace_support import set_memory_limit

            set_memory_limit(mb)
        os.execv(cmd[0], cmd)
    if argv[:1] == ["baseline"]:
        db, cids_file = argv[1], argv[2]
        domains = argv[3].split(",")
        digest = "--digest" in argv
        cids = open(cids_file).read().split()
        print(json.dumps(baseline(db, cids, domains, digest)))
        return 0
    if argv[:1] == ["bare"]:
        cids = open(argv[2]).read().split()
        print(json.dumps(bare(argv[1], cids, argv[3].split(","), int(argv[4]))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
