"""gunicorn settings of the API, taken from :class:`tracebus.config.Settings` (the environment).

Run: ``gunicorn -c api/gunicorn.conf.py 'api.app:get_app()'``. Workers are ``gthread``:
a streamed result or an event stream holds one thread, not the whole worker, and idle
keep-alive connections wait in the worker's poller rather than in a thread. Each open
stream or SSE client holds a thread until it ends, so ``TRACEBUS_API_WORKERS x
TRACEBUS_API_THREADS`` is the number of concurrent streams. The app is loaded in each
worker after the fork (no ``preload_app``), so no Redis socket is shared between workers.

HTTP metrics use prometheus-client's multiprocess mode: every worker writes its counters
to files in one directory (``TRACEBUS_METRICS_DIR``, or a private temporary one) and
``GET /metrics`` sums them. ``PROMETHEUS_MULTIPROC_DIR`` must be in a worker's environment
before it imports prometheus_client, so it is set here, in the arbiter, whose environment
every worker inherits; the directory is emptied when gunicorn starts (``on_starting``), a
dead worker's live gauges are dropped (``child_exit``), and a temporary directory is
removed at exit (``on_exit``).
"""

import os
import shutil
import tempfile
from pathlib import Path

from api.settings import ApiSettings

_settings = ApiSettings.from_env()

#: Marks a metrics directory this file created (removed at exit; a configured one is kept).
_TEMPORARY_MARK = ".tracebus-temporary"
_metrics_dir = Path(_settings.metrics_dir or tempfile.mkdtemp(prefix="tracebus-metrics-"))
if not _settings.metrics_dir:
    (_metrics_dir / _TEMPORARY_MARK).touch()
# Exported in the arbiter: the workers inherit both, and a reload (SIGHUP re-reads this
# file) finds TRACEBUS_METRICS_DIR set and keeps the same directory, so counters go on.
os.environ["TRACEBUS_METRICS_DIR"] = os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics_dir)

wsgi_app = "api.app:get_app()"
bind = [_settings.api_bind]
worker_class = "gthread"
workers = _settings.api_workers
threads = _settings.api_threads
timeout = _settings.api_timeout_s
graceful_timeout = _settings.api_graceful_timeout_s
keepalive = _settings.api_keepalive_s
max_requests = _settings.api_max_requests
max_requests_jitter = _settings.api_max_requests // 10
accesslog = _settings.api_access_log or None
errorlog = "-"
loglevel = _settings.log_level
proc_name = "tracebus-api"


def on_starting(server):
    """Check Redis's settings, and empty the metrics directory of a previous run's counts.

    An evicting ``maxmemory-policy`` stops the API from starting (queue data must never be
    evicted); an unreachable Redis only warns, since the API then answers 503 until it is back.
    """
    from tracebus.engine.connection import redis_client
    from tracebus.engine.errors import BrokerConnectionError
    from tracebus.engine.redis_check import check_redis_config

    client = redis_client(_settings.redis_url, socket_connect_timeout=3, socket_timeout=3)
    try:
        for warning in check_redis_config(client, _settings.redis_url):
            server.log.warning(warning)
    except BrokerConnectionError as e:
        server.log.warning("Redis not reachable at start (%s); the API answers 503 until it is", e)
    finally:
        client.close()
    _metrics_dir.mkdir(parents=True, exist_ok=True)
    for stale in _metrics_dir.glob("*.db"):
        stale.unlink()


def child_exit(server, worker):
    """A worker exited: drop its live gauges (its counters stay, so totals never go back)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, str(_metrics_dir))


def on_exit(server):
    if (_metrics_dir / _TEMPORARY_MARK).exists():
        shutil.rmtree(_metrics_dir, ignore_errors=True)
