"""The jobs domain of a trace job: one read of DW_MES_JOB per job, not one per unit.

DW_MES_JOB (1.27M rows) has no index on CONTAINERIDS, so the per-unit statement (the
original's 1,000 OR-ed LIKEs) reads all of it once per 1,000-CID unit: 116 full scans for a
114K-CID trace. Here the first jobs unit of a job that runs takes a lease and reads the table
once (:func:`scan_jobs`), matching CONTAINERIDS
against the job's whole CID set in Python; it routes each row to the chunk its CID belongs to
and stores the chunk's rows as parts as they fill (memory: the CID set and a bounded buffer).
Every jobs unit then writes its chunk's parts, in its statement's order, as its own rows:
exactly the rows its per-unit statement returns, so results, row counts and retries per unit
are as before.

A unit that finds the lease taken waits for the scan (heartbeating); when the lease holder
dies its lease expires and a waiter scans instead (a crash redoes that unit's work). Whatever
is missing (a part expired, a wait past :data:`WAIT_S`) falls back to the per-unit statement.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import contextmanager
from typing import Iterator, Sequence

import msgpack

from tracebus.engine.worker import heartbeat
from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.errors import SourceError
from tracebus.trace.events.keys import EventsKeys
from tracebus.trace.sources.base import expand_jobs, order_jobs
from tracebus.trace.sources.batching import Batch, rebatch, unique_cids
from tracebus.trace.sources.queries import jobs_scan_sql
from tracebus.trace.sources.reads import Reader
from tracebus.trace.ticker import ticking

log = logging.getLogger(__name__)

DOMAIN = "jobs"
#: Lease of the scan, renewed by a thread every fifth of it while the scan runs (the first
#: batch of a sorted full scan can take longer than that); a dead holder's lapses in 10 s.
LEASE_MS = 10_000
#: How long a unit waits for another unit's scan before it reads its own chunk instead.
WAIT_S = 300.0
POLL_S = 0.2
#: Rows buffered over all chunks before every buffer is stored (a chunk's own buffer is
#: stored when it reaches one batch): one batch (four peaked 5 MB higher in a 114K-CID scan
#: of the sample, for 119 parts instead of 198).
MAX_BUFFERED_BATCHES = 1
#: Table rows fetched at a time by the scan: few of them list one of the job's CIDs (44K of the
#: sample's 1.27M for a 114K-CID trace), so its batches are kept small (two are alive while the
#: next is fetched: 1.6 MB at 1,000 rows, 9.6 MB at 5,000).
SCAN_FETCH_ROWS = 1000


def scan_jobs(source: Reader, cids: Sequence[str], batch_rows: int) -> Iterator[Batch]:
    """The jobs domain's rows for any number of CIDs from one read of DW_MES_JOB
    (:func:`~tracebus.trace.sources.queries.jobs_scan_sql`) on ``source``: each job with one row
    per CID of ``cids`` its CONTAINERIDS lists (in ``cids``' order), the jobs in the table's
    order. Restricted to the CIDs of one 1,000-CID unit and ordered by
    :func:`~tracebus.trace.sources.base.order_jobs`, they are exactly that unit's
    :meth:`~tracebus.trace.sources.base.EventSource.fetch` rows. Memory: the CID set and one
    batch (the table is read :data:`SCAN_FETCH_ROWS` rows at a time).

    Raises:
        InvalidParams: at once, for bad CIDs or ``batch_rows < 1``.
        SourceError: while iterating, when the database fails.
    """
    cols = list(domains.columns(DOMAIN))
    if not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidParams(f"batch_rows must be a positive integer, got {batch_rows!r}")
    wanted = unique_cids(cids)

    def run() -> Iterator[Batch]:
        batches = source.execute(jobs_scan_sql(source.dialect), {}, min(batch_rows, SCAN_FETCH_ROWS))
        for rows in rebatch(expand_jobs(batches, wanted), batch_rows):
            if rows:
                yield cols, rows

    return run()


def run(rt, ctx) -> None:
    """Write the jobs rows of the unit's chunk (see the module docstring)."""
    redis, job_id = ctx.store.redis, ctx.job_id
    keys = EventsKeys(ctx.store.settings.key_prefix)
    chunk = ctx.store.plan(job_id).chunk_of(ctx.unit)
    deadline = time.monotonic() + WAIT_S
    while True:
        done = _done(redis, keys, job_id)
        if done is None:
            token = uuid.uuid4().hex
            if redis.set(keys.jobs_lease(job_id), token, nx=True, px=LEASE_MS):
                with _renewing(redis, keys.jobs_lease(job_id), token):
                    # Read again under the lease: a scan that ended between the read above
                    # and the lease stored its record before it let the lease go.
                    done = _done(redis, keys, job_id) or _scan(rt, ctx, keys, token)
        if done is not None:
            if _write_parts(rt, ctx, keys, done, chunk):
                return
            break
        if time.monotonic() > deadline:
            log.warning("job %s: no jobs scan after %.0f s; unit %d reads its own chunk", job_id, WAIT_S, ctx.unit)
            break
        heartbeat()
        time.sleep(POLL_S)
    for columns, rows in rt.source.fetch(DOMAIN, ctx.input, rt.settings.fetchmany_rows):
        ctx.write(columns, rows)


def _done(redis, keys: EventsKeys, job_id: str) -> dict | None:
    raw = redis.get(keys.jobs_done(job_id))
    return None if raw is None else msgpack.unpackb(raw, strict_map_key=False)


@contextmanager
def _renewing(redis, lease: str, token: str):
    """Keep the lease while the block runs; release it after."""
    def renew() -> None:
        try:
            redis.pexpire(lease, LEASE_MS)
        except Exception as e:  # noqa: BLE001 -- Redis away: the lease lapses, a waiter rescans
            log.warning("jobs scan lease %s not renewed: %s", lease, e)

    try:
        with ticking(LEASE_MS / 5000, renew, "jobs-scan-lease"):
            yield
    finally:
        # Not atomic: should the lease have lapsed and been taken meanwhile, the other scan
        # goes on and a third may start; each scan stores under its own token, so none mixes.
        if (redis.get(lease) or b"").decode() == token:
            redis.delete(lease)


def _scan(rt, ctx, keys: EventsKeys, token: str) -> dict:
    """Read DW_MES_JOB once for the whole job; store each chunk's rows as parts; return
    (and store) ``{"t": token, "n": {chunk: parts}}``."""
    store, job_id, redis = ctx.store, ctx.job_id, ctx.store.redis
    ttl, batch = store.settings.job_ttl_s, rt.settings.fetchmany_rows
    plan = store.plan(job_id)
    chunk_of: dict[str, int] = {}
    cids: list[str] = []
    for chunk, unit in enumerate(plan.units_of(DOMAIN)):
        for cid in store.load_input(job_id, unit):
            chunk_of.setdefault(cid, chunk)
            cids.append(cid)
    cid_at = len(domains.columns(DOMAIN)) - 1
    buffers: dict[int, list] = {}
    parts: dict[int, int] = {}
    buffered = 0

    def flush(chunk: int) -> None:
        nonlocal buffered
        rows = buffers.pop(chunk)
        redis.set(keys.jobs_part(job_id, token, chunk, parts.get(chunk, 0)),
                  msgpack.packb(rows, use_bin_type=True), ex=ttl)
        parts[chunk] = parts.get(chunk, 0) + 1
        buffered -= len(rows)

    started, read = time.monotonic(), 0
    for _, rows in scan_jobs(rt.source, cids, batch):
        for row in rows:
            chunk = chunk_of[row[cid_at]]
            buffers.setdefault(chunk, []).append(row)
            buffered += 1
            if len(buffers[chunk]) >= batch:
                flush(chunk)
        if buffered >= MAX_BUFFERED_BATCHES * batch:
            for chunk in list(buffers):
                flush(chunk)
        read += len(rows)
        heartbeat()
    for chunk in list(buffers):
        flush(chunk)
    done = {"t": token, "n": parts}
    redis.set(keys.jobs_done(job_id), msgpack.packb(done, use_bin_type=True), ex=ttl)
    log.info("job %s: jobs scan of %d CIDs in %.1f s, %d rows in %d parts", job_id, len(cids),
             time.monotonic() - started, read, sum(parts.values()))
    return done


def _write_parts(rt, ctx, keys: EventsKeys, done: dict, chunk: int) -> bool:
    """Write the chunk's stored rows as the unit's rows, then drop them; False (nothing
    written) when a part is gone (a re-run of a unit whose rows were written, or expired).
    A part that vanishes mid-way is a transient error: the retry reads its chunk."""
    redis, job_id = ctx.store.redis, ctx.job_id
    names = [keys.jobs_part(job_id, done["t"], chunk, i) for i in range(done["n"].get(chunk, 0))]
    if not all(redis.exists(name) for name in names):  # one key at a time: they are on many slots
        return False
    rows: list[tuple] = []
    for name in names:
        raw = redis.get(name)
        if raw is None:
            raise SourceError(f"job {job_id}: jobs part {name} expired while it was read", transient=True)
        rows += [tuple(r) for r in msgpack.unpackb(raw, raw=False)]
    rows = order_jobs(rows, ctx.input)  # one unit's jobs: hundreds of rows, not the job's
    columns, size = list(domains.columns(DOMAIN)), rt.settings.fetchmany_rows
    for i in range(0, len(rows), size):
        ctx.write(columns, rows[i:i + size])
    for name in names:
        redis.delete(name)
    return True
