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


def overall(redis, keys, actor: str = ACTOR_NAME) -> float | None:
    """Wall seconds per unit of the recent completed jobs over all their sections, or None."""
    got = pace.recent(redis, keys, JOB_KIND, actor)
    return got.overall if got is not None else None


def test_the_pace_is_the_wall_time_of_the_recent_completed_jobs_over_their_units(store, redis_client, keys, clock):
    assert overall(redis_client, keys) is None  # no job yet: the constant
    run_job(store, clock, 6, 2.0)  # 4 units, 6 s from the first taken to the last done
    assert overall(redis_client, keys) == 1.5
    clock.now += 100
    run_job(store, clock, 12, 0.5)  # 8 units in 3.5 s: (6 + 3.5) s over 12 units
    assert abs(overall(redis_client, keys) - 9.5 / 12) < 1e-9
    # a job that did not complete, and jobs of another actor, do not count
    failed = create_trace_job(store, request(n_cids=3, user="bob"))
    [unit, *_] = store.take_next_units(failed, 1000)
    clock.now += 50
    store.fail_unit(failed, unit, store.begin_unit(failed, unit), "ORA-01013")
    assert abs(overall(redis_client, keys) - 9.5 / 12) < 1e-9
    assert overall(redis_client, keys, "another_actor") is None


def run_timed_job(store, clock, domains, n_cids: int, unit_s: dict[str, float]) -> str:
    """A trace job over ``domains`` whose units each run ``unit_s[their domain]`` seconds, one after another."""
    job_id = create_trace_job(store, request(n_cids=n_cids, domains=domains))
    plan = store.plan(job_id)
    while units := store.take_next_units(job_id, 1000):
        for unit in units:
            attempt = store.begin_unit(job_id, unit)
            clock.now += unit_s[plan.section_of(unit)]
            writer = store.chunk_writer(job_id, unit, attempt)
            writer.write(["CONTAINERID"], [[f"u{unit}"]])
            store.finish_unit(job_id, unit, attempt, writer.commit())
    assert store.status(job_id)["status"] == "completed"
    return job_id


def test_a_job_of_other_domains_than_the_recent_ones_is_estimated_from_its_own_domains_pace(
        store, cfg, broker, clock):
    """Two history units cost what 16 holds units do: the estimate of a rejects + holds job after
    a history + materials job and a rejects + holds job is the rejects and holds pace (on the
    code before: the pace of every unit of both jobs, 4x too much), and a history job's is
    history's (there: 3x too little)."""
    from tracebus.trace.events.kind import EVENTS
    from tracebus.trace.request import normalize
    from tracebus.trace.service import TraceService

    service = TraceService(cfg, broker)

    def estimate(domains, n_cids=12) -> int:  # 12 CIDs: 4 units of each domain
        return service.estimated_seconds(normalize(request(n_cids=n_cids, domains=domains)))

    run_timed_job(store, clock, ("history", "materials"), 6, {"history": 4.0, "materials": 1.0})
    clock.now += 100
    run_timed_job(store, clock, ("rejects", "holds"), 6, {"rejects": 0.5, "holds": 0.25})
    assert estimate(("rejects", "holds")) == 3  # 4 x 0.5 + 4 x 0.25
    assert estimate(("history",)) == 16
    assert estimate(("materials", "holds")) == 5
    p = pace.recent(service.store.redis, service.store.keys, JOB_KIND, ACTOR_NAME)
    assert p.sections == {"history": 4.0, "materials": 1.0, "rejects": 0.5, "holds": 0.25}
    # jobs ran in neither: its declared work per unit against that of the domains that ran
    w = EVENTS.unit_weights
    per_weight = (4.0 + 1.0 + 0.5 + 0.25) / (w["history"] + w["materials"] + w["rejects"] + w["holds"])
    assert abs(p.unit_seconds("jobs", w) - w["jobs"] * per_weight) < 1e-9
    assert p.unit_seconds("jobs") == p.overall == (10 + 1.5) / 8  # no weights: every unit alike
