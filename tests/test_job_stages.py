"""Staged jobs: no unit of a stage starts before the stages before it settled."""

from __future__ import annotations

from tracebus.jobs.spec import JobSpec
from tracebus.jobs.store import JobStore


def test_a_staged_job_starts_no_unit_of_a_stage_before_the_stage_before_it_settled(broker, settings):
    # Given a job of three sections in two stages ("prepare", then "a" and "b"), 2 units each
    store = JobStore(broker.client, settings.replace(job_max_inflight_units=8))
    spec = JobSpec(kind="staged", user="u", sections=("prepare", "a", "b"), items=[1, 2], chunk_items=1,
                   queue="nowhere", actor_name="none", stages=(1, 2))
    job_id = store.create(spec)
    # When as many units as the cap allows are taken
    first = store.take_next_units(job_id, 8)
    # Then only the first stage's units are, until both have settled
    assert first == [0, 1]
    for unit in first:
        attempt = store.begin_unit(job_id, unit)
        assert store.take_next_units(job_id, 8) == []
        store.chunk_writer(job_id, unit, attempt).commit()
        store.finish_unit(job_id, unit, attempt, 0)
    assert store.take_next_units(job_id, 8) == [2, 3, 4, 5]
