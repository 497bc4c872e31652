"""Prometheus metrics of jobs, read from Redis when ``GET /metrics`` is scraped.

:class:`JobCollector` reads what :mod:`tracebus.jobs.figures` files after each job script
(under the ``{jobs}`` hash tag): one ZCOUNT per job status (the
per-status zsets, :meth:`tracebus.jobs.keys.JobKeys.jobs_by_status`) and one HGETALL of the
jobs' stats hash (``P:{jobs}:stats``), never a read of every job:

==================================  =============================================================
field                               incremented by
==================================  =============================================================
``jobs_submitted``                  ``job_metrics.lua`` after ``job_create.lua``
``units_done``, ``units_failed``,   ``job_metrics.lua`` after ``job_settle.lua`` (fenced: a stale
``rows``                            attempt counts nothing)
``job_duration_count:<status>``,    ``job_metrics.lua``, when a job reaches a final status
``job_duration_sum_ms:<status>``,   (after ``job_settle.lua``, ``job_cancel.lua``); buckets are
``job_duration_le:<status>:<ms>``   cumulative, bounds from ``JOB_DURATION_BUCKETS_S``
``reuse:<outcome>:<kind>``          ``JobStore.create`` / ``JobReuse.reuse`` (:mod:`tracebus.jobs.reuse`):
                                    a request with a result key answered from a stored result
                                    (``hit``), joined to its in-flight twin (``join``), run
                                    (``miss``), or run on demand (``fresh``)
==================================  =============================================================

If Redis cannot be read the families are left out (the engine's collector reports
``tracebus_redis_up``).
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from tracebus.engine.errors import BrokerError
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.figures import JOB_DURATION_BUCKETS_S
from tracebus.jobs.states import FINAL_STATES, STATES, UnitState

log = logging.getLogger(__name__)

_FINAL = tuple(s for s in STATES if s in FINAL_STATES)


class JobCollector(Collector):
    """Jobs by status, job counters and the job-duration histogram.

    Args:
        client(redis.Redis): the Redis holding the jobs.
        prefix(str): the key prefix.
    """

    def __init__(self, client: redis.Redis, prefix: str):
        self.client, self.keys = client, JobKeys(prefix)

    def describe(self):
        return []

    def collect(self) -> Iterator:
        try:
            now_ms = int(time.time() * 1000)
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(self.keys.stats())
            for status in STATES:
                pipe.zcount(self.keys.jobs_by_status(status), now_ms, "+inf")
            raw_stats, *job_counts = pipe.execute()
        except (BrokerError, redis.RedisError) as e:
            log.warning("metrics: cannot read jobs from Redis: %s", e)
            return
        stats = {k.decode(): int(v) for k, v in raw_stats.items()}
        yield _jobs_family(dict(zip(STATES, job_counts)))
        yield from _counter_families(stats)
        yield _duration_family(stats)

class PlacesCollector(Collector):
    """One pool of places (:mod:`tracebus.jobs.places`) as three gauges,
    ``tracebus_<name>_in_use``, ``_waiting`` and ``_max``.

    Args:
        places(Places): the pool.
        name(str): what its places are, in the metric names (``source_sessions``).
        what(str): the same in words, for the help texts.
    """

    def __init__(self, places, name: str, what: str):
        self.places, self.name, self.what = places, name, what

    def describe(self):
        return []

    def collect(self) -> Iterator:
        try:
            usage = self.places.usage()
        except (BrokerError, redis.RedisError) as e:
            log.warning("metrics: cannot read the %s from Redis: %s", self.what, e)
            return
        yield GaugeMetricFamily(f"tracebus_{self.name}_in_use", f"{self.what} in use now, all hosts",
                                value=usage.in_use)
        yield GaugeMetricFamily(f"tracebus_{self.name}_waiting", f"units waiting for one of the {self.what}",
                                value=usage.waiting)
        yield GaugeMetricFamily(f"tracebus_{self.name}_max", f"the cap of the {self.what} (as the takers set it)",
                                value=usage.capacity or self.places.capacity)


def _jobs_family(counts: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("tracebus_jobs", "Jobs retained in Redis (not expired), by internal "
                                                "status.", labels=["status"])
    for status in STATES:
        family.add_metric([status], counts.get(status, 0))
    return family


def _counter_families(stats: dict[str, int]) -> list:
    units = CounterMetricFamily("tracebus_units", "Job units settled, by outcome.", labels=["outcome"])
    units.add_metric([UnitState.DONE.value], stats.get("units_done", 0))
    units.add_metric([UnitState.FAILED.value], stats.get("units_failed", 0))
    reuse = CounterMetricFamily("tracebus_result_reuse", "Requests that could reuse a stored result, by job "
                                "kind and outcome: hit (answered from it), join (joined the identical "
                                "request in flight), miss (ran), fresh (ran: no-cache).", labels=["kind", "outcome"])
    for name, value in sorted(stats.items()):
        if name.startswith("reuse:"):
            _, outcome, kind = name.split(":", 2)
            reuse.add_metric([kind, outcome], value)
    return [CounterMetricFamily("tracebus_jobs_submitted", "Jobs admitted.",
                                value=stats.get("jobs_submitted", 0)),
            units, reuse,
            CounterMetricFamily("tracebus_rows", "Result rows written by units that finished.",
                                value=stats.get("rows", 0))]


def _duration_family(stats: dict[str, int]) -> HistogramMetricFamily:
    family = HistogramMetricFamily("tracebus_job_duration_seconds",
                                   "Time from a job's submission (or last retry) to its final status.",
                                   labels=["status"])
    for status in _FINAL:
        count = stats.get(f"job_duration_count:{status}", 0)
        buckets = [(floatToGoString(le), stats.get(f"job_duration_le:{status}:{le * 1000}", 0))
                   for le in JOB_DURATION_BUCKETS_S]
        buckets.append(("+Inf", count))
        family.add_metric([status], buckets, stats.get(f"job_duration_sum_ms:{status}", 0) / 1000)
    return family
