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


def _run(store, job_id, unit, rows=0, partial=b"", fail=False):
    attempt = store.begin_unit(job_id, unit)
    if fail:
        store.fail_unit(job_id, unit, attempt, "the source was away")
        return
    writer = store.chunk_writer(job_id, unit, attempt)
    if rows:
        writer.write(["N"], [[i] for i in range(rows)])
    writer.commit(partial)
    store.finish_unit(job_id, unit, attempt, writer.rows)


def test_a_retried_staged_job_reruns_every_stage_after_the_first_that_failed(broker, settings):
    # Given a job in three stages ("prepare", "a", "reduce"), 2 units each, where one unit of
    # "a" failed and the reduce ran on what the stage left
    store = JobStore(broker.client, settings.replace(job_max_inflight_units=8))
    spec = JobSpec(kind="staged", user="u", sections=("prepare", "a", "reduce"), items=[1, 2], chunk_items=1,
                   queue="nowhere", actor_name="none", stages=(1, 1, 1))
    job_id = store.create(spec)
    for unit in store.take_next_units(job_id, 8):
        _run(store, job_id, unit, rows=1)
    for unit in store.take_next_units(job_id, 8):
        _run(store, job_id, unit, rows=2, partial=b"p%d" % unit, fail=unit == 3)
    for unit in store.take_next_units(job_id, 8):
        _run(store, job_id, unit, rows=3, partial=b"r%d" % unit)
    assert store.status(job_id)["status"] == "partial"
    # When it is retried
    taken = store.retry(job_id)
    # Then the failed unit is sent, and the reduce waits for it again, its results gone
    assert taken == [3]
    progress = store.status(job_id)["progress"]
    assert (progress["units_done"], progress["rows"]) == (3, 4)
    assert [u["state"] for u in store.detail(job_id)["units"]] == ["done"] * 3 + ["queued", "pending", "pending"]
    assert dict(store.iter_partials(job_id)) == {2: b"p2"}
    assert not store.redis.hlen(store.keys.job_manifest(job_id, "reduce"))
    assert store.take_next_units(job_id, 8) == []
    # And the reduce runs once the failed unit is done, and the job completes with every row
    _run(store, job_id, 3, rows=2, partial=b"p3")
    assert store.take_next_units(job_id, 8) == [4, 5]
    for unit in (4, 5):
        _run(store, job_id, unit, rows=3, partial=b"r%d" % unit)
    status = store.status(job_id)
    assert (status["status"], status["progress"]["units_done"], status["progress"]["rows"]) == ("completed", 6, 12)
