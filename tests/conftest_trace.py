"""Helpers and session fixtures of the end-to-end trace-job tests (test_trace_*.py).

Real Redis (the session server of conftest.py), real ``tracebus worker tracebus.trace.tasks``
supervisors (the ``supervisor`` fixture of conftest_proc.py: own session, log file, killed at
teardown) and the synthetic SQLite data. A result is checked by paging through every domain
with ``TraceService.page`` and comparing the multiset of rows with the source's own ``fetch``
of the same CIDs in one go.

The 20,000-CID job needs a larger database than the scale-0.01 ``sample_db`` (about 1,150 trace
CIDs): :func:`big_db` is the scale-0.22 sample that tests/test_e2e_http.py's job
needs too (about 26,000 trace CIDs, ~20 s to generate here, so it is cached on disk across
runs: one sample for both, not two), and the tests use its first 20,000 trace CIDs.
"""

from __future__ import annotations

import functools
import operator
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from tests.conftest_data import cached_sample
from tests.helpers import NO_REUSE
from tracebus.engine.actor import get_broker
from api.settings import ApiSettings
from tracebus.engine.keys import Keys
from tracebus.jobs.keys import JobKeys
from tracebus.trace import domains
from tracebus.jobs.view import FINAL_STATES
from tracebus.trace.service import TraceService
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import cids

#: The domains of the query_tool profile, in request order.
DOMAINS = list(domains.PROFILES["query_tool"])
#: The scale of tests/test_e2e_http.py's sample (E2E_SCALE), shared.
BIG_SCALE = 0.22
BIG_CIDS = 20_000
#: Worker and service settings of these tests: many units, several stored parts per unit.
TRACE_ENV = {"TRACE_CHUNK_CIDS": "500", "TRACE_JOB_MAX_INFLIGHT_UNITS": "2",
             "TRACE_STREAM_BATCH_SIZE": "1000", "TRACE_FETCHMANY_SIZE": "700", **NO_REUSE}
#: For a test that counts every unit's attempts: the default claim time (3 s) instead of the
#: suite's 1 s, with which a live worker starved of CPU on a loaded machine had its unit
#: reclaimed by a janitor and run again (attempt 2), counted as a duplicate.
STEADY_CLAIM = {"TRACEBUS_CLAIM_MIN_IDLE_MS": "3000"}


@pytest.fixture(scope="session")
def big_db() -> Path:
    """The scale-0.22 synthetic database, generated once and cached on disk (:func:`cached_sample`)."""
    return cached_sample(BIG_SCALE)


@pytest.fixture(scope="session")
def big_trace(big_db) -> list[str]:
    """Every trace CID of the big database (more than BIG_CIDS)."""
    trace = cids(big_db)
    assert len(trace) > BIG_CIDS + 100, len(trace)
    return trace


@pytest.fixture(scope="session")
def big_cids(big_trace) -> list[str]:
    return big_trace[:BIG_CIDS]


@pytest.fixture(scope="session")
def big_expected(big_db) -> dict[str, Counter]:
    """The direct query of the 20,000 CIDs, per domain."""
    return first_expected(big_db, BIG_CIDS)


@functools.cache
def first_expected(db: Path, count: int) -> dict[str, Counter]:
    """The direct query of the first ``count`` trace CIDs of ``db`` (the order of
    :func:`~tracebus.trace.synth.cids`), once per process: a test of fewer CIDs than
    ``big_expected`` holds does not pay for the 20,000 (about 3 s of CPU)."""
    return direct(db, cids(db)[:count])


def comparable(domain: str, row: tuple) -> tuple:
    """``row`` without what depends on the time of the read: the HOLD_HOURS of a hold not yet
    released counts up to "now", so two reads a few seconds apart differ there."""
    if domain == "holds":
        cols = domains.columns("holds")
        if row[cols.index("HOLD_STATUS")] == "HOLD":
            hours = cols.index("HOLD_HOURS")
            assert isinstance(row[hours], (int, float)) and row[hours] >= 0, row
            return row[:hours] + ("<open>",) + row[hours + 1:]
    return row


def direct(db: Path, container_ids: list[str]) -> dict[str, Counter]:
    """Rows of every domain for ``container_ids`` straight from the source, as multisets."""
    source = SqliteSource(db)
    try:
        return {d: Counter(comparable(d, tuple(r)) for _, rows in source.fetch(d, container_ids, 5000)
                           for r in rows) for d in DOMAINS}
    finally:
        source.close()


def request(container_ids, domains_=DOMAINS) -> dict:
    return {"profile": "query_tool", "container_ids": list(container_ids), "domains": list(domains_)}


def trace_service(db: Path, **overrides: str) -> tuple[TraceService, dict[str, str]]:
    """A TraceService on the supervisor fixture's broker, and the worker environment that
    matches its settings (chunk size, per-job cap, database)."""
    env = {**TRACE_ENV, "TRACEBUS_SQLITE_PATH": str(db), **overrides}
    broker = get_broker()
    settings = ApiSettings.from_env(env, redis_url=broker.settings.redis_url,
                                 key_prefix=broker.settings.key_prefix)
    return TraceService(settings, broker), env


def start_workers(supervisor, svc: TraceService, env: dict[str, str], processes: int = 2):
    """A real trace-worker supervisor on the service's queue (killed at teardown)."""
    return supervisor("--queues", svc.settings.queue, processes=processes,
                      modules=("tracebus.trace.tasks",), **env)


def wait_final(sup, svc: TraceService, job_id: str, timeout_s: float) -> dict:
    """Wait until the job reaches a final state; returns its status document."""
    def final():
        doc = svc.status(job_id)
        return doc if doc["state"] in FINAL_STATES else None
    return sup.wait(final, timeout_s, f"job {job_id} to finish")


def page_all(svc: TraceService, job_id: str, domain: str, limit: int = 3333) -> list[tuple]:
    """Every row of ``domain`` read page by page (pages straddle the stored chunks)."""
    cols = list(domains.columns(domain))
    as_tuple = operator.itemgetter(*cols)
    rows: list[tuple] = []
    offset, total = 0, None
    while offset is not None:
        page = svc.page(job_id, domain, offset, limit, False)
        assert page["complete"]
        total = page["total"] if total is None else total
        assert page["total"] == total, "the total changed while paging a finished job"
        if page["rows"]:
            assert page["columns"] == cols
        rows += [comparable(domain, as_tuple(r)) for r in page["rows"]]
        assert page["next_offset"] in (None, offset + len(page["rows"]))
        offset = page["next_offset"]
    assert len(rows) == total
    return rows


def assert_rows_equal(domain: str, got: list[tuple], want: Counter) -> None:
    """``got`` is ``want`` as a multiset: no row missing, none extra or duplicated."""
    have = Counter(got)
    extra, missing = have - want, want - have
    assert not extra and not missing, (
        f"{domain}: {sum(extra.values())} extra or duplicated rows (e.g. {list(extra)[:2]}), "
        f"{sum(missing.values())} missing (e.g. {list(missing)[:2]})")
    assert len(got) == sum(want.values())


def assert_result(svc: TraceService, job_id: str, expected: dict[str, Counter],
                  only=DOMAINS) -> None:
    """Every domain in ``only``, paged through completely, equals the direct query."""
    for domain in only:
        assert_rows_equal(domain, page_all(svc, job_id, domain), expected[domain])


def subset(expected: dict[str, Counter], container_ids) -> dict[str, Counter]:
    """The expected rows of some CIDs (every domain's rows carry their CONTAINERID)."""
    wanted = set(container_ids)
    out = {}
    for domain, rows in expected.items():
        i = domains.columns(domain).index("CONTAINERID")
        out[domain] = Counter({r: n for r, n in rows.items() if r[i] in wanted})
    return out


def units(svc: TraceService, job_id: str) -> list[dict]:
    """The per-unit rows of the job's detail (state, attempt, rows, error)."""
    return svc.detail(job_id)["units"]


def chunk_keys(redis, keys: JobKeys, job_id: str) -> set[str]:
    """The result chunks stored in Redis for ``job_id`` (SCAN); a chunk's columnar copy
    counts as its chunk, so a copy left by an attempt no manifest names shows as that chunk."""
    copy = keys.job_chunk_copy("j", "s", 0, 0, 1)[len(keys.job_chunk("j", "s", 0, 0, 1)):]
    return {k.decode().removesuffix(copy) for k in redis.scan_iter(match=keys.job_scan(job_id), count=1000)
            if not k.decode().startswith(keys.job(job_id))}


def manifest_chunk_keys(redis, svc: TraceService, job_id: str) -> set[str]:
    """The result chunks that the job's manifests list (committed units only)."""
    k, out = svc.store.keys, set()
    for domain in svc.store.plan(job_id).sections:
        for unit, value in redis.hgetall(k.job_manifest(job_id, domain)).items():
            attempt, counts = msgpack.unpackb(value)
            out.update(k.job_chunk(job_id, domain, int(unit), part, attempt)
                       for part in range(len(counts)))
    return out


def queue_drained(redis, svc: TraceService) -> bool:
    """Every message sent to the trace queue was processed and acknowledged (acks delete)."""
    k = Keys(svc.settings.key_prefix)
    return redis.xlen(k.stream(svc.settings.queue)) == 0 and redis.zcard(k.delayed(svc.settings.queue)) == 0


def assert_every_key_expires(redis, svc: TraceService, job_ids) -> None:
    """SCAN the whole prefix: only the queue's stream, the declared-queue set, the worker
    listing and the stats hash may live without a TTL; every key of each job has one, no
    longer than the job TTL, the job hash expires last (the status outlives the result), and
    the jobs index outlives every job it lists."""
    k, q, ttl_ms = svc.store.keys, Keys(svc.settings.key_prefix), svc.settings.job_ttl_s * 1000
    allowed = {q.stream(svc.settings.queue), q.queues(), q.workers(), q.stats(), q.stats(svc.settings.queue), k.stats()}
    names = sorted(key.decode() for key in redis.scan_iter(match=f"{k.prefix}:*", count=1000))
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.execute_command("PEXPIRETIME", name)  # absolute expiry in ms, -1 when none
    expiry = pipe.execute()
    now_s, now_us = redis.time()
    # -2: gone since the SCAN (a short-lived key such as the summary tick's expired, or one was
    # deleted): not a key without a TTL
    expires = {n: at for n, at in zip(names, expiry) if at != -2}
    unexpiring = [n for n, at in expires.items() if at == -1 and n not in allowed]
    assert not unexpiring, f"keys without a TTL: {unexpiring}"
    now_ms = now_s * 1000 + now_us // 1000
    for job_id in job_ids:
        # its control keys (the job's tag) and its chunks (their own tags, after the job id)
        mine = {n: at for n, at in expires.items()
                if n == k.job(job_id) or n.startswith((k.job(job_id) + ":", f"{k.prefix}:job:{{{job_id}:"))}
        assert any(n.startswith(f"{k.prefix}:job:{{{job_id}:") for n in mine) or not chunk_keys(redis, k, job_id)
        assert k.job(job_id) in mine, f"job hash of {job_id} is gone"
        assert all(now_ms < at <= now_ms + ttl_ms for at in mine.values()), mine
        assert mine[k.job(job_id)] == max(mine.values()), "a key of the result outlives the job's status"
        assert expires[k.jobs_index()] >= mine[k.job(job_id)], "the jobs index expires before a job it lists"
