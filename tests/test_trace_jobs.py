"""Trace jobs end to end: real Redis, real worker processes, the synthetic dataset.

A 200-unit job over the five domains of query_tool, paged through completely, equals the
direct query on each topology (4,000 CIDs in chunks of 100); every key it wrote expires; a
small job submitted while a large one (20,000 CIDs, 200 units) runs finishes first, within seconds (the per-job in-flight cap); an identical request while a job
is in flight returns that job (single-flight).
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import TOPOLOGIES
from tests.conftest_trace import (
    BIG_CIDS,
    DOMAINS,
    STEADY_CLAIM,
    assert_every_key_expires,
    assert_result,
    chunk_keys,
    direct,
    first_expected,
    manifest_chunk_keys,
    request,
    start_workers,
    trace_service,
    units,
    wait_final,
)
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.view import FINAL_STATES
from tracebus.trace.synth import cids


#: CIDs, and the chunk, stored-part and fetch sizes of the workers, on every topology: 4,000
#: CIDs in chunks of 100 make the 200 units that 20,000 CIDs in chunks of 500 (TRACE_ENV) make,
#: with the same stored parts per unit (history ~950 rows a unit in parts of 200), in 20% of
#: the rows (the one-node run was 20,000 CIDs, then 8,000 in chunks of 200: more rows through
#: the same paths).
SCALED_JOB = (4_000, {"TRACE_CHUNK_CIDS": "100", "TRACE_STREAM_BATCH_SIZE": "200",
                      "TRACE_FETCHMANY_SIZE": "140"})


@pytest.mark.parametrize("topology", [*TOPOLOGIES, "cluster"], indirect=True)
def test_a_200_unit_job_paged_through_equals_the_direct_query(topology, supervisor, redis_client, big_db,
                                                               big_cids):
    count, sizes = SCALED_JOB
    some = big_cids[:count]
    expected = first_expected(big_db, count)
    svc, env = trace_service(big_db, **sizes, **STEADY_CLAIM)
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(some), "alice"))

    status = wait_final(sup, svc, job, 60)

    n_units = len(DOMAINS) * count // int(env["TRACE_CHUNK_CIDS"])
    assert n_units == 200
    assert status["status"] == status["state"] == "completed", status
    assert status["failed_domains"] == [] and status["error"] is None
    assert status["progress"]["units_done"] == status["progress"]["units_total"] == n_units
    assert status["progress"]["rows"] == sum(sum(c.values()) for c in expected.values())
    assert_result(svc, job, expected)
    # every unit ran once and stored exactly the chunks its manifest lists: nothing duplicated
    assert {u["attempt"] for u in units(svc, job)} == {1}
    assert chunk_keys(redis_client, svc.store.keys, job) == manifest_chunk_keys(redis_client, svc, job)
    assert_every_key_expires(redis_client, svc, [job])


def test_a_small_job_finishes_while_a_large_one_runs(supervisor, redis_client, big_db, big_cids, big_trace):
    svc, env = trace_service(big_db)
    sup = start_workers(supervisor, svc, env)
    large = svc.submit(svc.parse(request(big_cids), "alice"))
    sup.wait(lambda: svc.status(large)["progress"]["units_done"] >= 4, 20, "the large job under way")

    small_cids = big_trace[BIG_CIDS:BIG_CIDS + 100]
    submitted = time.monotonic()
    small = svc.submit(svc.parse(request(small_cids), "bob"))
    done = wait_final(sup, svc, small, 5)
    took = time.monotonic() - submitted
    large_now = svc.status(large)

    assert done["state"] == "completed", done
    assert large_now["state"] == "running", large_now
    assert large_now["progress"]["units_done"] < large_now["progress"]["units_total"]
    assert took < 5
    print(f"\nsmall job done {took:.2f}s after submission; large job at "
          f"{large_now['progress']['units_done']}/{large_now['progress']['units_total']} units")
    assert_result(svc, small, direct(big_db, small_cids))
    svc.cancel(large)  # not needed any further


@ON_NODE_AND_CLUSTER
def test_an_identical_request_in_flight_returns_the_same_job(supervisor, redis_client, sample_db):
    svc, env = trace_service(sample_db)
    trace = cids(sample_db)[:600]  # two units a domain (chunks of 500); more CIDs prove nothing more
    first = svc.submit(svc.parse(request(trace), "alice"))  # no worker yet: it stays queued

    # same profile, domains and CID set, in another order and with repeats: the same job
    twin = request(list(reversed(trace)) + trace[:10], list(reversed(DOMAINS)))
    assert svc.submit(svc.parse(twin, "alice")) == first
    # another user, another CID set or other domains: other jobs
    others = [svc.submit(svc.parse(request(trace), "bob")),
              svc.submit(svc.parse(request(trace[:-1]), "alice")),
              svc.submit(svc.parse(request(trace, DOMAINS[:2]), "alice"))]
    assert len({first, *others}) == 4
    assert svc.status(first)["state"] == "queued"

    sup = start_workers(supervisor, svc, env)
    for job in (first, *others):
        assert wait_final(sup, svc, job, 30)["state"] == "completed"
    again = svc.submit(svc.parse(request(trace), "alice"))  # the first one is no longer in flight
    assert again != first and svc.status(again)["state"] not in FINAL_STATES - {"completed"}
    assert_result(svc, first, direct(sample_db, trace))
