"""TRACE_JOB_TIMEOUT_SECONDS: a job running past its time limit fails, keeps what it finished,
and can be retried; a worker notices before it starts another unit."""

from __future__ import annotations

import pytest
from tests.helpers import create_trace_job, run_trace_unit_here
from tracebus.engine.message import Message
from tracebus.jobs.middleware import JobUnits

from tracebus.engine.actor import set_broker
from tracebus.engine.broker import Broker
from tracebus.trace import tasks
from tracebus.trace.events.kind import ACTOR_NAME
from tracebus.jobs.store import JobStore
from tracebus.trace.sources import open_source
from tests.test_jobstore import Clock, request, run_unit


@pytest.fixture
def cfg(settings, sample_db):
    return settings.replace(chunk_cids=3, job_max_inflight_units=2, job_timeout_s=60,
                            sqlite_path=str(sample_db))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(redis_client, cfg, clock):
    return JobStore(redis_client, cfg, clock=clock)


def test_a_job_past_its_time_limit_fails_keeps_its_finished_units_and_can_be_retried(store, clock):
    # Given a running job with one unit done
    job_id = create_trace_job(store, request())
    store.take_next_units(job_id, 2)
    run_unit(store, job_id, 0)
    assert not store.overdue(job_id)
    # When its time limit passes
    clock.now += 61
    assert store.overdue(job_id)
    assert store.time_out(job_id) is True
    # Then it is failed with an error that names the limit, and its finished unit is kept
    status = store.status(job_id)
    assert status["status"] == "failed" and "TRACE_JOB_TIMEOUT_SECONDS (60 s)" in status["error"]
    states = {u["unit"]: u["state"] for u in store.detail(job_id)["units"]}
    assert states[0] == "done" and set(list(states.values())[1:]) == {"cancelled"}
    assert store.time_out(job_id) is False and not store.overdue(job_id)
    # And a retry re-runs only the cancelled units, with a fresh time limit
    assert 0 not in store.retry(job_id)
    assert store.status(job_id)["status"] == "queued" and not store.overdue(job_id)


def test_a_worker_fails_an_overdue_job_instead_of_running_its_next_unit(store, clock, cfg, redis_client):
    broker = Broker(cfg, client=redis_client)
    set_broker(broker)
    hooks = JobUnits()
    hooks.store = store
    # Given a job submitted two minutes ago with a one-minute limit
    job_id = create_trace_job(store, request())
    units = store.take_next_units(job_id, 2)
    clock.now += 120
    # When a worker picks up one of its units (the jobs middleware runs before the unit)
    hooks.before_process(None, tasks.ACTORS[ACTOR_NAME], Message(cfg.queue, ACTOR_NAME, (job_id, units[0])))
    run_trace_unit_here(broker, cfg, open_source(cfg), job_id, units[0], store=store)
    # Then the job is failed, the unit never ran, and nothing more was sent
    assert store.status(job_id)["status"] == "failed"
    assert store.status(job_id)["progress"]["rows"] == 0
    assert redis_client.xlen(broker.keys.stream(cfg.queue)) == 0
