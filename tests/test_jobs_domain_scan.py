"""The jobs domain from one read of DW_MES_JOB per trace job (tracebus/trace/events/jobs_domain.py).

The per-unit statement reads all of DW_MES_JOB (no CONTAINERIDS index) once per 1,000 CIDs;
the scan reads it once per job. Held here: the scan's rows, restricted to one unit's CIDs,
ordered as the per-unit statement, are exactly that unit's per-unit rows; a real trace job on real workers stores, unit
by unit, exactly the per-unit rows, from one scan, and every key it wrote expires.
"""

from __future__ import annotations

import msgpack

from tests.conftest_trace import (
    assert_every_key_expires,
    page_all,
    request,
    start_workers,
    trace_service,
    units,
    wait_final,
)
from tracebus.jobs.runner import UnitContext
from tracebus.trace.events import jobs_domain
from tracebus.trace.events.keys import EventsKeys
from tracebus.trace.runtime import Runtime, TraceUnit
from tracebus.trace.sources.base import order_jobs
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import cids

CHUNK = 500


def _per_unit(source, trace: list[str], chunk: int = CHUNK) -> list[list[tuple]]:
    return [[r for _, rows in source.fetch("jobs", trace[i:i + chunk], 700) for r in rows]
            for i in range(0, len(trace), chunk)]


def test_the_scans_rows_of_a_unit_are_that_units_rows_in_order(big_db):
    source = SqliteSource(big_db)
    trace = cids(big_db)[:6000]
    expected = _per_unit(source, trace, 1000)
    assert sum(map(len, expected)) > 1000 and all(expected)
    chunk_of = {cid: i // 1000 for i, cid in enumerate(trace)}
    got: list[list[tuple]] = [[] for _ in expected]
    for _, rows in jobs_domain.scan_jobs(source, trace, 333):
        assert 0 < len(rows) <= 333
        for row in rows:
            got[chunk_of[row[-1]]].append(row)
    assert [order_jobs(rows, trace[i * 1000:(i + 1) * 1000]) for i, rows in enumerate(got)] == expected
    source.close()


def test_a_trace_jobs_domain_is_one_scan_with_every_units_rows(supervisor, redis_client, big_db):
    # Given a 6,000-CID trace of the jobs domain, 500 CIDs per unit, on two workers
    svc, env = trace_service(big_db)
    trace = cids(big_db)[:6000]
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(trace, ["jobs"]), "alice"))
    status = wait_final(sup, svc, job, 60)
    assert status["state"] == "completed" and status["failed_domains"] == [], status
    # Then the domain's rows, unit after unit, are exactly the per-unit statement's
    source = SqliteSource(big_db)
    expected = _per_unit(source, trace)
    source.close()
    assert page_all(svc, job, "jobs") == [r for rows in expected for r in rows]
    assert [u["rows"] for u in units(svc, job)] == [len(rows) for rows in expected]
    # And they came from one scan: its record is there, its parts are consumed, its lease gone
    keys = EventsKeys(svc.settings.key_prefix)
    done = msgpack.unpackb(redis_client.get(keys.jobs_done(job)), strict_map_key=False)
    assert set(done["n"]) == {i for i, rows in enumerate(expected) if rows}
    assert redis_client.get(keys.jobs_lease(job)) is None
    assert not list(redis_client.scan_iter(match=f"{keys.prefix}:trace:jobs:{job}:{done['t']}:*"))
    assert_every_key_expires(redis_client, svc, [job])


def test_a_scan_that_ends_between_the_read_and_the_lease_is_not_run_again(supervisor, redis_client, big_db,
                                                                          monkeypatch):
    # Given a 2,000-CID jobs trace (4 units) run in this process, no workers, counting the source's scans
    svc, _ = trace_service(big_db)
    trace = cids(big_db)[:2000]
    job = svc.submit(svc.parse(request(trace, ["jobs"]), "alice"))
    source = SqliteSource(big_db)
    scans = []
    real_scan = jobs_domain.scan_jobs
    monkeypatch.setattr(jobs_domain, "scan_jobs", lambda *a: scans.append(1) or real_scan(*a))
    runtime = Runtime(svc.settings, source)

    def run(unit: int) -> int:
        attempt = svc.store.begin_unit(job, unit)
        writer = svc.store.chunk_writer(job, unit, attempt)
        ctx = UnitContext(svc.store, job, unit, attempt, writer, svc.store.load_input(job, unit))
        jobs_domain.run(TraceUnit(ctx, runtime), TraceUnit(ctx, runtime))
        rows = writer.commit()
        svc.store.finish_unit(job, unit, attempt, rows)
        return rows

    # When unit 0 scans, and unit 1 reads "no scan yet" just before that scan's record lands
    expected = _per_unit(source, trace)
    assert run(0) == len(expected[0]) and scans == [1]
    read = jobs_domain._done
    reads = []
    monkeypatch.setattr(jobs_domain, "_done", lambda *a: None if not reads and not reads.append(1) else read(*a))
    # Then unit 1 finds the record under the lease and writes its rows from it: one scan in all
    assert run(1) == len(expected[1]) > 0
    assert scans == [1] and redis_client.get(EventsKeys(svc.settings.key_prefix).jobs_lease(job)) is None
    source.close()
