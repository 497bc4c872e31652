"""``GET /metrics``: Prometheus text for the whole system, and the HTTP metrics of the API.

Two sources end up in one exposition:

* the system-wide figures (queues, workers, jobs, counters kept by the workers and job
  scripts) read from Redis at scrape time by :class:`tracebus.engine.metrics.SystemCollector`
  and :class:`tracebus.jobs.metrics.JobCollector`;
* HTTP request counts and latencies by route template and status, recorded by
  :class:`HttpMetrics` (a Falcon middleware) in every gunicorn worker. gunicorn runs
  several worker processes, so they use prometheus-client's multiprocess mode: each
  process writes its values to files in ``TRACEBUS_METRICS_DIR`` (which
  ``api/gunicorn.conf.py`` hands to prometheus-client as ``PROMETHEUS_MULTIPROC_DIR``
  before any worker starts), and a scrape sums the files of every process, dead ones
  included, whichever worker answers it. Without a metrics directory (tests, a single
  process) the HTTP metrics live in the app's own registry.

The route label is the route template (``/api/trace/job/{job_id}``), never the raw path,
so a scan of random URLs cannot blow up the series count (unrouted requests are
``route="unmatched"``). The latency is the time until the response starts: for the
streamed results and event streams it excludes the streaming itself.
"""

from __future__ import annotations

import logging
import time

import falcon
from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram,
                               disable_created_metrics, generate_latest, multiprocess, values)

from api.settings import ApiSettings
from tracebus.engine.metrics import SystemCollector
from tracebus.jobs.metrics import JobCollector, PlacesCollector
from tracebus.trace.sources.control import session_places

log = logging.getLogger(__name__)

#: Latency buckets (seconds): sub-millisecond probes up to synchronous traces of 20,000 CIDs.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpMetrics:
    """Falcon middleware counting requests and timing them by method, route and status.

    Args:
        registry(CollectorRegistry | None): where the metrics are registered; None in
            multiprocess mode (the values go to files; the scrape reads them all).
    """

    def __init__(self, registry: CollectorRegistry | None):
        labels = ("method", "route", "status")
        self.requests = Counter("tracebus_http_requests", "HTTP requests answered by the API, by method, "
                                "route template and status.", labels, registry=registry)
        self.latency = Histogram("tracebus_http_request_duration_seconds",
                                 "Time until the API started its response, by method, route template "
                                 "and status.", labels, registry=registry, buckets=LATENCY_BUCKETS_S)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.metrics_started = time.perf_counter()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        started = getattr(req.context, "metrics_started", None)
        if started is None:
            return
        labels = (req.method if req.method in _METHODS else "other", req.uri_template or "unmatched",
                  str(resp.status_code))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(time.perf_counter() - started)


class Metrics:
    """``GET /metrics``: the Prometheus text exposition of ``registry``.

    Open like the probes (``auth_required = False``): a Prometheus server carries no
    user token. It exposes counts and sizes, never job contents or users.
    """

    auth_required = False

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(self.registry)


def multiprocess_mode(settings: ApiSettings) -> bool:
    """True when this process records its HTTP metrics in ``settings.metrics_dir``'s files.

    That needs prometheus-client to have been imported with ``PROMETHEUS_MULTIPROC_DIR``
    set (``api/gunicorn.conf.py`` does it); otherwise the values are in memory and the
    directory would read empty, so the app keeps them in its own registry instead.
    """
    if not settings.metrics_dir:
        return False
    if values.ValueClass is values.MutexValue:
        log.warning("TRACEBUS_METRICS_DIR is set but prometheus-client was imported without "
                    "PROMETHEUS_MULTIPROC_DIR (run gunicorn with -c api/gunicorn.conf.py): "
                    "/metrics shows this process's HTTP requests only")
        return False
    return True


def build(settings: ApiSettings, broker) -> tuple[HttpMetrics, Metrics]:
    """The middleware and the ``/metrics`` resource of one app."""
    # No ``*_created`` series: multiprocess mode has none, so both modes expose the same names.
    disable_created_metrics()
    registry = CollectorRegistry()
    if multiprocess_mode(settings):
        multiprocess.MultiProcessCollector(registry, path=settings.metrics_dir)
        middleware = HttpMetrics(None)
    else:
        middleware = HttpMetrics(registry)
    registry.register(SystemCollector(broker, queues=[settings.queue]))
    registry.register(JobCollector(broker.client, settings.key_prefix))
    registry.register(PlacesCollector(session_places(broker.client, settings), "source_sessions",
                                      "sessions against the source"))
    return middleware, Metrics(registry)
