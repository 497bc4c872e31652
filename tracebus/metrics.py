"""System-wide Prometheus metrics, read from Redis when ``GET /metrics`` is scraped.

:class:`SystemCollector` is a prometheus-client custom collector: at each scrape it reads
what the workers, the supervisor and the job scripts keep in Redis, so the figures cover
every host and process, not just the API process that answers. It costs a handful of
round trips whatever the load: the queues' lengths, the worker registry, one HGETALL of
the stats hash and one ZCOUNT per job status (never a read of every job).

The stats hash (``P:stats``, :meth:`tracebus.keys.Keys.stats`) holds integer counters,
incremented with HINCRBY where the event happens, in the round trip that already happens:

==================================  =============================================================
field                               incremented by
==================================  =============================================================
``processed:<queue>``               :meth:`Broker.ack`, in the MULTI of each batch of acks
``failed:<queue>``                  ``retry.lua`` / ``dead_letter.lua`` (the actor raised)
``retried:<queue>``                 ``retry.lua``
``dead_lettered:<queue>``           ``dead_letter.lua``, ``requeue.lua``, ``autoclaim.lua``
``redelivered:<source>:<queue>``    ``requeue.lua`` (source ``supervisor``), ``autoclaim.lua``
                                    (``janitor``): entries put back to run again
``reclaims:<source>``               :func:`tracebus.recovery.count_reclaim`: a dead worker's
                                    entries taken back, or a janitor pass that found idle ones
``jobs_submitted``                  ``job_create.lua``
``units_done``, ``units_failed``,   ``job_settle.lua`` (fenced: a stale attempt counts nothing)
``rows``
``job_duration_count:<status>``,    ``_jobstats_lib.lua``, when a job reaches a final status
``job_duration_sum_ms:<status>``,   (``job_settle.lua``, ``job_cancel.lua``); buckets are
``job_duration_le:<status>:<ms>``   cumulative, bounds from ``JOB_DURATION_BUCKETS_S``
==================================  =============================================================

Jobs by status come from the per-status zsets the job scripts maintain
(:meth:`tracebus.keys.Keys.jobs_by_status`). If Redis cannot be read, the scrape still
answers: ``tracebus_redis_up`` is 0 and the Redis-backed families are left out.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .errors import BrokerError
from .registry import WorkerRegistry
from .trace.jobstore import JOB_DURATION_BUCKETS_S
from .trace.jobview import FINAL_STATES, STATES

log = logging.getLogger(__name__)

#: Who redelivers entries (``tracebus_redeliveries_total`` / ``tracebus_reclaims_total``).
RECLAIM_SOURCES = ("supervisor", "janitor")
#: Per-queue counters: stats field prefix -> (metric name, help).
_QUEUE_COUNTERS = {
    "processed": ("tracebus_messages_processed", "Messages run successfully and acknowledged."),
    "failed": ("tracebus_messages_failed",
               "Message runs whose actor raised (each is then retried or dead-lettered)."),
    "retried": ("tracebus_messages_retried", "Retries scheduled after a failed run."),
    "dead_lettered": ("tracebus_messages_dead_lettered",
                      ("Messages moved to the dead-letter stream (failed past their retries, "
                       "undecodable, unknown actor, or past their delivery limit when reclaimed).")),
}
_FINAL = tuple(s for s in STATES if s in FINAL_STATES)


class SystemCollector(Collector):
    """Queue, worker, job and counter families read from Redis at each scrape.

    Args:
        broker: the :class:`~tracebus.broker.Broker` whose client and key prefix are read.
    """

    def __init__(self, broker):
        self.broker = broker
        self.registry = WorkerRegistry(broker)

    def describe(self):
        return []  # no Redis round trip when the collector is registered

    def collect(self) -> Iterator:
        started = time.perf_counter()
        try:
            families, up = self._families(), 1
        except (BrokerError, redis.RedisError) as e:
            log.warning("metrics: cannot read Redis: %s", e)
            families, up = [], 0
        yield from families
        yield GaugeMetricFamily("tracebus_redis_up", "1 when the last scrape could read Redis, else 0.",
                                value=up)
        yield GaugeMetricFamily("tracebus_metrics_scrape_seconds",
                                "Time spent reading Redis for this scrape.",
                                value=time.perf_counter() - started)

    # -- reading -------------------------------------------------------------------------------
    def _families(self) -> list:
        broker, keys = self.broker, self.broker.keys
        queues = set(broker.queues()) | {broker.settings.queue}
        queue_stats = [broker.queue_stats(q) for q in sorted(queues)]
        workers = self.registry.list()
        now_ms = int(time.time() * 1000)
        pipe = broker.client.pipeline(transaction=False)
        pipe.hgetall(keys.stats())
        for status in STATES:
            pipe.zcount(keys.jobs_by_status(status), now_ms, "+inf")
        raw_stats, *job_counts = pipe.execute()
        stats = {k.decode(): int(v) for k, v in raw_stats.items()}
        return [*_queue_families(queue_stats), *_worker_families(workers),
                _jobs_family(dict(zip(STATES, job_counts))),
                *_counter_families(stats, queues), _duration_family(stats)]


def _queue_families(queue_stats: list[dict]) -> list:
    specs = (("length", "tracebus_queue_depth", "Messages waiting in the queue, not yet delivered."),
             ("pending", "tracebus_queue_pending",
              "Messages delivered to a worker and not yet acknowledged."),
             ("delayed", "tracebus_queue_delayed", "Messages scheduled for later (retries with backoff)."),
             ("dead", "tracebus_queue_dead", "Records in the queue's dead-letter stream."))
    out = []
    for field, name, doc in specs:
        family = GaugeMetricFamily(name, doc, labels=["queue"])
        for q in queue_stats:
            family.add_metric([q["queue"]], q[field])
        out.append(family)
    return out


def _worker_families(workers: list[dict]) -> list:
    live = GaugeMetricFamily("tracebus_workers_live", "Worker processes registered and alive (all hosts).",
                             value=len(workers))
    busy = GaugeMetricFamily("tracebus_workers_busy", "Live workers running a message now.",
                             value=sum(1 for w in workers if w.get("current")))
    rss = GaugeMetricFamily("tracebus_worker_rss_bytes", "Resident set size of each live worker.",
                            labels=["host", "pid"])
    done = GaugeMetricFamily("tracebus_worker_messages_done",
                             "Messages each live worker has run since it started.", labels=["host", "pid"])
    for w in workers:
        labels = [w.get("host", ""), w.get("pid", "")]
        rss.add_metric(labels, int(w.get("rss_bytes") or 0))
        done.add_metric(labels, int(w.get("done") or 0))
    return [live, busy, rss, done]


def _jobs_family(counts: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("tracebus_jobs", "Trace jobs retained in Redis (not expired), by internal "
                                                "status.", labels=["status"])
    for status in STATES:
        family.add_metric([status], counts.get(status, 0))
    return family


def _counter_families(stats: dict[str, int], queues: set[str]) -> list:
    out = []
    for prefix, (name, doc) in _QUEUE_COUNTERS.items():
        family = CounterMetricFamily(name, doc, labels=["queue"])
        values = {q: 0 for q in queues}
        values.update({f[len(prefix) + 1:]: v for f, v in stats.items() if f.startswith(prefix + ":")})
        for queue, value in sorted(values.items()):
            family.add_metric([queue], value)
        out.append(family)

    redeliveries = CounterMetricFamily("tracebus_redeliveries",
                                       "Entries taken back from a dead worker (supervisor) or an idle "
                                       "one (janitor) and requeued to run again.", labels=["source", "queue"])
    values = {(s, q): 0 for s in RECLAIM_SOURCES for q in queues}
    for f, v in stats.items():
        if f.startswith("redelivered:"):
            _, source, queue = f.split(":", 2)
            values[(source, queue)] = v
    for labels, value in sorted(values.items()):
        redeliveries.add_metric(list(labels), value)
    reclaims = CounterMetricFamily("tracebus_reclaims", "Reclaims that took entries back: a dead worker's "
                                                        "(supervisor), or a janitor pass that found idle "
                                                        "ones.", labels=["source"])
    for source in RECLAIM_SOURCES:
        reclaims.add_metric([source], stats.get(f"reclaims:{source}", 0))

    units = CounterMetricFamily("tracebus_units", "Trace-job units settled, by outcome.", labels=["outcome"])
    units.add_metric(["done"], stats.get("units_done", 0))
    units.add_metric(["failed"], stats.get("units_failed", 0))
    out += [redeliveries, reclaims,
            CounterMetricFamily("tracebus_jobs_submitted", "Trace jobs admitted.",
                                value=stats.get("jobs_submitted", 0)),
            units,
            CounterMetricFamily("tracebus_rows", "Result rows written by units that finished.",
                                value=stats.get("rows", 0))]
    return out


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
