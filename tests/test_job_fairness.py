"""Fairness between users' jobs through the worker pool (issue 40, item 7).

One user's big jobs are queued first, then another user's small job: the small job's units
must not wait behind the first user's backlog. Measured in units, not seconds (the order in
which the workers settle them, from each unit's own ``finished_ms``), so the machine's load
does not move the result: how many of the first user's units the workers finished between the
small job's submission and its end. With the per-user share (:mod:`tracebus.jobs.share`) that is about as
many as the small job has units, whatever the backlog; with the share lifted
(``TRACE_USER_MAX_INFLIGHT_UNITS`` past every window: each job its own window, the FIFO of
before) it grows with the number of big jobs, and the same run measures it.
"""

from __future__ import annotations

import msgpack

from tests.fair_units import ACTOR, QUEUE
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.settings import JobSettings
from tracebus.jobs.share import Shares
from tracebus.jobs.spec import JobSpec
from tracebus.jobs.store import JobStore

UNIT_S = 0.1  # longer than the worker's slow-batch mark: each worker reads one message at a time
BIG_JOBS, BIG_UNITS, SMALL_UNITS = 5, 12, 4


def _submit(store, dispatcher, user: str, units: int) -> str:
    spec = JobSpec(kind="fair", user=user, sections=("rows",), items=list(range(units)), chunk_items=1,
                   queue=QUEUE, actor_name=ACTOR, app={"unit_s": UNIT_S})
    job_id = store.create(spec)
    dispatcher.start(job_id)
    return job_id


def _finished_ms(store, job_id: str) -> list[int]:
    return [unit["finished_ms"] for unit in _units(store, job_id)]


def _units(store, job_id: str) -> list[dict]:
    raw = store.redis.hgetall(store.keys.job_units(job_id))
    return [msgpack.unpackb(v) for v in raw.values()]


def _run(supervisor, share: int, tag: str) -> dict:
    """Big jobs of one user, then a small job of another, on 2 workers with the given user
    share; what the first user's units did while the small job ran."""
    sup = supervisor(processes=2, modules=("tests.fair_units",), TRACE_USER_MAX_INFLIGHT_UNITS=str(share))
    try:
        settings = JobSettings.adopt(sup.broker.settings).replace(user_max_inflight_units=share)
        store = JobStore(sup.broker.client, settings)
        dispatcher = Dispatcher(sup.broker, store)
        big = [_submit(store, dispatcher, f"alice-{tag}", BIG_UNITS) for _ in range(BIG_JOBS)]
        small = _submit(store, dispatcher, f"bob-{tag}", SMALL_UNITS)
        everything = [*big, small]
        sup.wait(lambda: all(store.status(j)["status"] == "completed" for j in everything),
                 timeout_s=60, message="every job completed")
        small_done = max(_finished_ms(store, small))
        small_created = int(store.redis.hget(store.keys.job(small), "created_ms"))
        # Only the units finished while the small job was there: how many finished before it was
        # submitted is the submitting's speed, which load moves (12 > 10 in a loaded CI run).
        before = sum(1 for j in big for ms in _finished_ms(store, j) if small_created <= ms < small_done)
        return {"big_units_before": before, "small_s": store.status(small)["elapsed_seconds"]}
    finally:
        sup.kill()


def test_a_small_job_of_another_user_does_not_wait_behind_one_users_backlog(supervisor):
    # Given 5 jobs of 12 units of one user queued first, then another user's job of 4 units,
    # on 2 workers: once with each job its own window (the FIFO of before), once with the
    # per-user share (the default: one job's window per user)
    fifo = _run(supervisor, share=BIG_JOBS * 2 * 10, tag="fifo")
    fair = _run(supervisor, share=0, tag="fair")
    print(f"FIFO: {fifo}; fair: {fair}")
    # Then with the share the small job is done after about as many of the big user's units
    # as it has itself (the stream alternates between the two users, plus the 2 units the
    # big user had running when it came), not after several per big job
    assert fair["big_units_before"] <= 2 * SMALL_UNITS + 2, (fair, fifo)
    # And without it, the same run waits behind every big job's window
    assert fifo["big_units_before"] > 2 * SMALL_UNITS + 2, (fair, fifo)


def test_a_retried_job_takes_only_the_places_its_users_other_jobs_left(settings, redis_client):
    # Given one user's job holding both places of the user's share, and another job of theirs
    # that failed
    store = JobStore(redis_client, settings.replace(job_max_inflight_units=2, user_max_inflight_units=0))
    dispatcher = Dispatcher(_NoBroker(), store)

    def spec(units):
        return JobSpec(kind="fair", user="carol", sections=("rows",), items=list(range(units)), chunk_items=1,
                       queue="nowhere", actor_name=ACTOR, app={"unit_s": 0})
    failed = store.create(spec(1))
    dispatcher.start(failed)
    store.fail_unit(failed, 0, store.begin_unit(failed, 0), "the source was away")
    busy = store.create(spec(4))
    dispatcher.start(busy)
    assert int(redis_client.hget(store.keys.job(busy), "inflight")) == 2
    # When the failed job is retried, it gets no place and waits queued
    assert store.retry(failed) == [] and store.status(failed)["status"] == "queued"
    # And a unit of the busy job settling hands its place to it (it holds fewest)
    attempt = store.begin_unit(busy, 0)
    store.chunk_writer(busy, 0, attempt).commit()
    store.finish_unit(busy, 0, attempt, 0)
    assert Shares(store).open_units(busy, by_unit=0) == {failed: [0]}
    # And without the user's other job in flight it gets its whole window again
    store.cancel(busy)
    assert Shares(store).room(failed) == 2


class _NoBroker:
    def enqueue_many(self, messages) -> None:
        pass


def test_a_user_alone_borrows_a_place_past_the_share_while_no_message_waits(settings, redis_client):
    # Given a user's job holding their share (2 units) and another job of theirs with none
    from tracebus.engine.broker import Broker
    cfg = settings.replace(job_max_inflight_units=2, user_max_inflight_units=0)
    broker = Broker(cfg, client=redis_client)
    broker.declare_queue("lend-q")
    store = JobStore(redis_client, cfg)
    dispatcher = Dispatcher(broker, store)

    def submit(user, units):
        job_id = store.create(JobSpec(kind="fair", user=user, sections=("rows",), items=list(range(units)),
                                      chunk_items=1, queue="lend-q", actor_name=ACTOR, app={"unit_s": 0}))
        dispatcher.start(job_id)
        return job_id

    def refill(job_id):
        opened = Shares(store).open_units(job_id)
        for job, units in opened.items():
            dispatcher.send(job, units)
        return opened

    first = submit("dave", 6)
    second = submit("dave", 6)
    # While the first job's two messages wait for a worker, the second gets no place
    assert refill(second) == {}
    # When the workers have read them (nothing waits), the user borrows one place, and one only
    assert len(broker.fetch(["lend-q"], "w1", 10, 10)) == 2
    assert refill(second) == {second: [0]}
    assert refill(second) == {} and refill(first) == {}
    # And another user's job gets its whole share at once, the borrower's loan not renewed
    eve = submit("eve", 6)
    assert int(redis_client.hget(store.keys.job(eve), "inflight")) == 2
    broker.fetch(["lend-q"], "w1", 1, 10)  # a worker reads the borrowed message; eve's two wait
    assert refill(second) == {} and refill(first) == {}
