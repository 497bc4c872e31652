"""The counters the workers and the supervisor keep in Redis (failures, retries, dead letters,
reclaims, redeliveries), as :class:`tracebus.engine.metrics.SystemCollector` exposes them after real
workers ran: an in-process worker, and a real supervisor whose worker is SIGKILLed.

The API side of ``GET /metrics`` is tested in test_metrics.py.
"""

from __future__ import annotations

import os
import signal
import time

from prometheus_client import CollectorRegistry, generate_latest

from tests import actors
from tests.helpers import create_trace_job
from tests.conftest_proc import run_until
from tests.redis_server import free_port
from tests.test_metrics import Scrape
from tracebus.engine.broker import Broker
from tracebus.engine.metrics import SystemCollector
from tracebus.jobs.metrics import JobCollector
from tracebus.jobs.store import JobStore
from tracebus.jobs.view import STATES


def collect(broker: Broker) -> Scrape:
    """The system-wide families, as the API exposes them for ``broker``'s Redis and prefix."""
    registry = CollectorRegistry()
    registry.register(SystemCollector(broker))
    registry.register(JobCollector(broker.client, broker.keys.prefix))
    return Scrape(generate_latest(registry).decode())


def test_failures_retries_and_dead_letters_are_counted_per_queue(worker, broker):
    actors.flaky.send(1, 2)  # fails twice, retried twice, then succeeds
    actors.always_fails.send(2)  # no retries: dead-lettered at once
    stats = broker.keys.stats("tests")

    run_until(worker, lambda: broker.client.hget(stats, "processed:tests") == b"1"
              and broker.client.hget(stats, "dead_lettered:tests") == b"1", 10, "flaky to pass")
    metrics = collect(broker)

    assert metrics.value("tracebus_messages_processed_total", queue="tests") == 1
    assert metrics.value("tracebus_messages_failed_total", queue="tests") == 3
    assert metrics.value("tracebus_messages_retried_total", queue="tests") == 2
    assert metrics.value("tracebus_messages_dead_lettered_total", queue="tests") == 1
    assert metrics.value("tracebus_queue_dead", queue="tests") == 1
    assert metrics.value("tracebus_redeliveries_total", source="supervisor", queue="tests") == 0


def test_a_killed_worker_counts_one_reclaim_and_one_redelivery(supervisor):
    pool = supervisor(processes=2)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    actors.slow_record.send(1, 30.0)
    pid = int(pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start"))

    os.kill(pid, signal.SIGKILL)
    pool.wait(lambda: int(client.hget(f"{prefix}:test:started", 1)) != pid, 10, "the message to run again")
    # the registry is refreshed about once a second: the replacement worker, and the busy one
    metrics = pool.wait(lambda: (m := collect(pool.broker)).value("tracebus_workers_live") == 2
                        and m.value("tracebus_workers_busy") == 1 and m, 10, "the registry to list 2 workers")

    assert metrics.value("tracebus_reclaims_total", source="supervisor") == 1
    assert metrics.value("tracebus_reclaims_total", source="janitor") == 0
    assert metrics.value("tracebus_redeliveries_total", source="supervisor", queue="tests") == 1
    assert metrics.value("tracebus_messages_dead_lettered_total", queue="tests") == 0
    assert metrics.value("tracebus_queue_pending", queue="tests") == 1
    assert metrics.value("tracebus_workers_busy") == 1


def test_an_unreachable_redis_is_reported_not_raised(settings):
    broker = Broker(settings.replace(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    try:
        metrics = collect(broker)
    finally:
        broker.close()

    assert metrics.value("tracebus_redis_up") == 0
    assert "tracebus_queue_depth" not in metrics.families


# -- the job figures kept by the job scripts ---------------------------------------------------------
class Clock:
    """The job store's clock, moved by hand (real time: the collector counts jobs from now)."""

    def __init__(self):
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_job_durations_are_observed_per_final_status_and_from_the_last_retry(redis_client, settings, broker):
    clock = Clock()
    store = JobStore(redis_client, settings.replace(chunk_cids=3), clock=clock)
    job_id = create_trace_job(store, {"profile": "query_tool", "container_ids": ["c1", "c2", "c3"],
                           "domains": ["history"], "params": {}, "user": "alice"})  # one unit
    assert collect(broker).value("tracebus_jobs", status="queued") == 1

    # The unit fails 3 s after submission: the job fails
    [unit] = store.take_next_units(job_id, 10)
    clock.now += 2
    attempt = store.begin_unit(job_id, unit)
    running = collect(broker)
    clock.now += 1
    store.fail_unit(job_id, unit, attempt, "boom")
    failed = collect(broker)
    # Retried 100 s later, it completes 4 s after the retry
    clock.now += 100
    assert store.retry(job_id) == [unit]
    retried = collect(broker)
    clock.now += 4
    attempt = store.begin_unit(job_id, unit)
    store.chunk_writer(job_id, unit, attempt).commit()
    store.finish_unit(job_id, unit, attempt, 7)
    done = collect(broker)

    assert running.value("tracebus_jobs", status="running") == 1
    assert running.value("tracebus_jobs", status="queued") == 0
    assert failed.value("tracebus_jobs", status="failed") == 1
    assert failed.value("tracebus_jobs", status="running") == 0
    assert failed.value("tracebus_job_duration_seconds_count", status="failed") == 1
    assert failed.value("tracebus_job_duration_seconds_sum", status="failed") == 3.0
    assert failed.value("tracebus_job_duration_seconds_bucket", status="failed", le="1.0") == 0
    assert failed.value("tracebus_job_duration_seconds_bucket", status="failed", le="5.0") == 1
    assert retried.value("tracebus_jobs", status="queued") == 1
    assert retried.value("tracebus_jobs", status="failed") == 0
    assert done.value("tracebus_jobs", status="completed") == 1
    assert sum(done.value("tracebus_jobs", status=s) for s in STATES) == 1
    assert done.value("tracebus_job_duration_seconds_sum", status="completed") == 4.0  # from the retry
    assert done.value("tracebus_job_duration_seconds_count", status="failed") == 1  # kept
    assert done.value("tracebus_units_total", outcome="done") == 1
    assert done.value("tracebus_units_total", outcome="failed") == 1
    assert done.value("tracebus_rows_total") == 7
    assert done.value("tracebus_jobs_submitted_total") == 1


def test_jobs_leave_the_status_counts_when_they_expire(redis_client, settings, broker):
    clock = Clock()
    store = JobStore(redis_client, settings.replace(job_ttl_s=60), clock=clock)
    clock.now -= 61  # admitted 61 s ago with a 60 s TTL: its hash would be gone by now
    create_trace_job(store, {"profile": "query_tool", "container_ids": ["c1"], "domains": ["history"], "params": {},
                  "user": "bob"})

    assert collect(broker).value("tracebus_jobs", status="queued") == 0
