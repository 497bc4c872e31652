"""The pace of recent jobs (issue 39, item 6): a submit's ``estimated_seconds`` is its units at
the wall seconds per unit of the last completed jobs of its kind (:mod:`tracebus.jobs.pace`).
Real redis-server; the job store's clock is the test's, so the jobs' times are exact."""

from __future__ import annotations

from tests.helpers import create_trace_job
from tests.test_jobstore import Clock, cfg, clock, keys, request, run_unit, store  # noqa: F401  (fixtures)
from tracebus.jobs import pace
from tracebus.trace.request import JOB_KIND
from tracebus.trace.events.kind import ACTOR_NAME


def run_job(store, clock, n_cids: int, unit_s: float) -> str:
    """A trace job of ``n_cids`` over two domains (3 CIDs a unit), its units run ``unit_s`` apart."""
    job_id = create_trace_job(store, request(n_cids=n_cids))
    first = True
    while units := store.take_next_units(job_id, 1000):  # two in flight at most
        for unit in units:
            if not first:
                clock.now += unit_s
            first = False
            run_unit(store, job_id, unit)
    assert store.status(job_id)["status"] == "completed"
    return job_id


def test_the_pace_is_the_wall_time_of_the_recent_completed_jobs_over_their_units(store, redis_client, keys, clock):
    assert pace.unit_seconds(redis_client, keys, JOB_KIND, ACTOR_NAME) is None  # no job yet: the constant
    run_job(store, clock, 6, 2.0)  # 4 units, 6 s from the first taken to the last done
    assert pace.unit_seconds(redis_client, keys, JOB_KIND, ACTOR_NAME) == 1.5
    clock.now += 100
    run_job(store, clock, 12, 0.5)  # 8 units in 3.5 s: (6 + 3.5) s over 12 units
    assert abs(pace.unit_seconds(redis_client, keys, JOB_KIND, ACTOR_NAME) - 9.5 / 12) < 1e-9
    # a job that did not complete, and jobs of another actor, do not count
    failed = create_trace_job(store, request(n_cids=3, user="bob"))
    [unit, *_] = store.take_next_units(failed, 1000)
    clock.now += 50
    store.fail_unit(failed, unit, store.begin_unit(failed, unit), "ORA-01013")
    assert abs(pace.unit_seconds(redis_client, keys, JOB_KIND, ACTOR_NAME) - 9.5 / 12) < 1e-9
    assert pace.unit_seconds(redis_client, keys, JOB_KIND, "another_actor") is None
