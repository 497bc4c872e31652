"""Prometheus metrics of the engine, read from Redis when ``GET /metrics`` is scraped.

:class:`SystemCollector` is a prometheus-client custom collector: at each scrape it reads
what the workers, the supervisor and the job scripts keep in Redis, so the figures cover
every host and process, not just the API process that answers. It costs a handful of
round trips whatever the load: the queues' lengths, the worker registry and one HGETALL of
each stats hash.

The stats hashes (one per queue, ``P:q:{<queue>}:stats``, and ``P:stats`` for counters of no
queue: :meth:`tracebus.engine.keys.Keys.stats`, summed by :meth:`Broker.stats`) hold integer
counters, incremented with HINCRBY where the event happens, in the round trip that already
happens:

==================================  =============================================================
field                               incremented by
==================================  =============================================================
``processed:<queue>``               :meth:`Broker.ack`, in the MULTI of each batch of acks
``failed:<queue>``                  ``retry.lua`` / ``dead_letter.lua`` (the actor raised)
``retried:<queue>``                 ``retry.lua``
``dead_lettered:<queue>``           ``dead_letter.lua``, ``requeue.lua``, ``autoclaim.lua``
``redelivered:<source>:<queue>``    ``requeue.lua`` (source ``supervisor``), ``autoclaim.lua``
                                    (``janitor``): entries put back to run again
``reclaims:<source>``               :func:`tracebus.engine.recovery.count_reclaim`: a dead worker's
                                    entries taken back, or a janitor pass that found idle ones
==================================  =============================================================

The job layer adds its own families with :class:`tracebus.jobs.metrics.JobCollector`. If
Redis cannot be read, the scrape still answers: ``tracebus_redis_up`` is 0 and the
Redis-backed families are left out.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tracebus.engine.errors import BrokerError
from tracebus.engine.redis_memory import memory_state
from tracebus.engine.registry import WorkerRegistry

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


class SystemCollector(Collector):
    """Queue, worker and counter families read from Redis at each scrape.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker` whose client and key prefix are read.
        queues: queues always reported, declared or not yet (an application's own queue).
    """

    def __init__(self, broker, queues=()):
        self.broker = broker
        self.queues = set(queues)
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
        broker = self.broker
        queues = set(broker.queues()) | self.queues
        queue_stats = [broker.queue_stats(q) for q in sorted(queues)]
        workers = self.registry.list()
        stats = broker.stats()
        return [*_queue_families(queue_stats), *_worker_families(workers), *_counter_families(stats, queues),
                *_memory_families(memory_state(broker.client))]


def _memory_families(state) -> list:
    return [GaugeMetricFamily("tracebus_redis_used_memory_bytes", "Redis used_memory (a cluster: the sum "
                                                                 "over its masters).", value=state.used_bytes),
            GaugeMetricFamily("tracebus_redis_maxmemory_bytes", "Redis maxmemory (0: no limit; a cluster: "
                                                               "the sum, 0 when a master has none).",
                              value=state.max_bytes),
            GaugeMetricFamily("tracebus_redis_memory_used_ratio",
                              "used_memory / maxmemory (0 without a limit; a cluster: of its fullest "
                              "master); at 1 Redis refuses writes.",
                              value=state.ratio),
            GaugeMetricFamily("tracebus_redis_full", "1 when Redis is full: maxmemory reached with "
                                                     "noeviction (a cluster: on any master), so submits "
                                                     "answer 507 REDIS_FULL.",
                              value=int(state.full))]


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
    # host and pid alone repeat across containers (same hostname, same pids): the worker's
    # consumer name carries a random boot id, so every series is unique across hosts.
    labels = ["host", "pid", "worker"]
    rss = GaugeMetricFamily("tracebus_worker_rss_bytes", "Resident set size of each live worker.",
                            labels=labels)
    done = GaugeMetricFamily("tracebus_worker_messages_done",
                             "Messages each live worker has run since it started.", labels=labels)
    for w in workers:
        labels = [w.get("host", ""), w.get("pid", ""), w.get("consumer", "")]
        rss.add_metric(labels, int(w.get("rss_bytes") or 0))
        done.add_metric(labels, int(w.get("done") or 0))
    return [live, busy, rss, done]


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

    out += [redeliveries, reclaims]
    return out
