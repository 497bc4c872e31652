"""gunicorn settings of the API, taken from :class:`api.settings.ApiSettings` (the environment).

Run: ``gunicorn -c api/gunicorn.conf.py 'api.app:get_app()'``. Workers are ``gevent`` by
default (``TRACEBUS_API_WORKER_CLASS``): every connection is a greenlet, so hundreds of slow
or idle clients (headers sent a byte at a time, forgotten keep-alives, event streams, NDJSON
downloads) cost a little memory each and never hold the service from others; a client that
has not sent its request line and headers within ``TRACEBUS_API_KEEPALIVE_SECONDS`` is
disconnected, and one worker holds at most ``TRACEBUS_API_WORKER_CONNECTIONS`` connections.
gevent's monkey-patching (done by the worker after the fork) makes redis-py's sockets, the
SSE's blocking XREAD and the streamed bodies cooperative; the database work of an answer made
in the request (a synchronous trace, seed-resolve, lineage, a short equipment-period) runs on
a small thread pool off the loop (:mod:`api.offloop`), so SQLite (C code that does not yield)
never holds the worker's other clients. ``gthread``
remains for deployments that prefer threads behind a buffering reverse proxy: there a
request being read holds a thread, so ``TRACEBUS_API_WORKERS x TRACEBUS_API_THREADS`` slow
clients stop the API (issue 12). The app is loaded in each worker after the fork (no
``preload_app``), so no Redis socket is shared between workers.

HTTP metrics use prometheus-client's multiprocess mode: every worker writes its counters
to files in one directory (``TRACEBUS_METRICS_DIR``, or a private temporary one) and
``GET /metrics`` sums them. ``PROMETHEUS_MULTIPROC_DIR`` must be in a worker's environment
before it imports prometheus_client, so it is set here, in the arbiter, whose environment
every worker inherits; the directory is emptied when gunicorn starts (``on_starting``), a
dead worker's live gauges are dropped and its counters and histograms added into one archive
file per type (``child_exit``: recycled workers would otherwise leave a file each, every
scrape merging them all), and a temporary directory is removed at exit (``on_exit``).

gunicorn's control socket (25.1+) is off: its default path is one per user
(``$XDG_RUNTIME_DIR/gunicorn.ctl``), shared by every gunicorn of the host, so one instance took
over, then removed, another's; tracebus never uses ``gunicornc``.
"""

import os
import shutil
import tempfile
import warnings
from pathlib import Path

from api.settings import ApiSettings

_settings = ApiSettings.from_env()

if _settings.api_worker_class == "gevent":
    # The gevent worker patches after the fork, and gunicorn itself imported ssl before this
    # file ran, so gevent warns on every start. The API makes no TLS connection of its own
    # (rediss:// goes through ssl.SSLContext, which is looked up when it is used, i.e.
    # patched), and redis.asyncio, the other early import it names, is not used here.
    warnings.filterwarnings("ignore", message="Monkey-patching ssl after ssl has already been imported")

#: Marks a metrics directory this file created (removed at exit; a configured one is kept).
_TEMPORARY_MARK = ".tracebus-temporary"
_metrics_dir = Path(_settings.metrics_dir or tempfile.mkdtemp(prefix="tracebus-metrics-"))
if not _settings.metrics_dir:
    (_metrics_dir / _TEMPORARY_MARK).touch()
# Exported in the arbiter: the workers inherit both, and a reload (SIGHUP re-reads this
# file) finds TRACEBUS_METRICS_DIR set and keeps the same directory, so counters go on.
os.environ["TRACEBUS_METRICS_DIR"] = os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics_dir)

# gunicorn's own errors (400, 414, 431: before the app sees the request) as JSON, not HTML
import gunicorn.util  # noqa: E402

from api.gunicorn_errors import (MAX_HEADER_FIELD_BYTES, MAX_HEADER_FIELDS, MAX_REQUEST_LINE,  # noqa: E402
                                 write_error)

gunicorn.util.write_error = write_error

wsgi_app = "api.app:get_app()"
bind = [_settings.api_bind]
worker_class = _settings.api_worker_class
workers = _settings.api_workers
threads = _settings.api_threads  # gthread only
worker_connections = _settings.api_worker_connections  # gevent only
timeout = _settings.api_timeout_s
graceful_timeout = _settings.api_graceful_timeout_s
keepalive = _settings.api_keepalive_s
# The request line and headers gunicorn reads before its own 414 / 431 (documented from the same constants).
limit_request_line = MAX_REQUEST_LINE
limit_request_fields = MAX_HEADER_FIELDS
limit_request_field_size = MAX_HEADER_FIELD_BYTES
max_requests = _settings.api_max_requests
max_requests_jitter = _settings.api_max_requests // 10
accesslog = _settings.api_access_log or None
errorlog = "-"
loglevel = _settings.log_level
proc_name = "tracebus-api"
control_socket_disable = True


def on_starting(server):
    """Check Redis's settings, and empty the metrics directory of a previous run's counts.

    An evicting ``maxmemory-policy`` stops the API from starting (queue data must never be
    evicted); an unreachable Redis only warns, since the API then answers 503 until it is back.
    """
    from tracebus.engine.connection import redis_client
    from tracebus.engine.errors import BrokerConnectionError
    from tracebus.engine.redis_check import check_redis_config

    client = None
    try:
        # A cluster client reads the slot map from a seed as it is built: inside the try.
        client = redis_client(_settings.redis_url, socket_connect_timeout=3, socket_timeout=3)
        for warning in check_redis_config(client, _settings.redis_url):
            server.log.warning(warning)
    except BrokerConnectionError as e:
        server.log.warning("Redis not reachable at start (%s); the API answers 503 until it is", e)
    finally:
        if client is not None:
            client.close()
    _metrics_dir.mkdir(parents=True, exist_ok=True)
    for stale in _metrics_dir.glob("*.db"):
        stale.unlink()


def post_worker_init(worker):
    """gevent: give redis-py back the real ``select.poll``, and shorten the switch interval.

    Before every command redis-py checks that the pooled connection has nothing left to read
    with ``poll(0)``. gevent's patched poll turns that into a trip through the hub, which first
    runs every other ready greenlet, so under concurrent requests each Redis call waited for
    the others: status p50 went from 3 to 23 ms with 20 pollers. A real ``poll(0)`` never
    blocks; nothing in the API polls with a timeout (sockets wait through gevent).

    Answers made in the request run on :mod:`api.offloop`'s threads; with a 1 ms switch
    interval (5 ms by default) the loop waits less for the GIL one of them holds.

    Any worker class: large blocks stay out of glibc's heap (:func:`api.heap.fix_mmap_threshold`).
    """
    if _settings.api_worker_class == "gevent":
        import select
        import sys

        from gevent import monkey

        from api.offloop import SWITCH_INTERVAL_S

        select.poll = monkey.get_original("select", "poll")
        sys.setswitchinterval(SWITCH_INTERVAL_S)  # the loop gets the GIL back soon from api.offloop's threads
    from api import heap

    heap.fix_mmap_threshold()  # what a closed stream held goes back to the system (issue 39)


def child_exit(server, worker):
    """A worker exited: drop its live gauges, and add its counters and histograms into the
    archive files (totals never go back, and the directory holds a file per live worker)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, str(_metrics_dir))
    try:
        _archive(worker.pid)
    except OSError as e:  # a full disk must not stop the arbiter; the file is merged next time
        server.log.warning("metrics of worker %s not archived: %s", worker.pid, e)


def _archive(pid: int) -> None:
    from prometheus_client.mmap_dict import MmapedDict

    for kind in ("counter", "histogram"):
        dead, archive = _metrics_dir / f"{kind}_{pid}.db", _metrics_dir / f"{kind}_archive.db"
        if not dead.exists():
            continue
        totals: dict[str, float] = {}
        for path in (archive, dead):
            if path.exists():
                for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path)):
                    totals[key] = totals.get(key, 0.0) + value
        staged = _metrics_dir / f".{kind}_archive.new"  # not *.db: a scrape never reads it half written
        merged = MmapedDict(str(staged))
        for key, value in totals.items():
            merged.write_value(key, value, 0.0)
        merged.close()
        os.replace(staged, archive)
        dead.unlink()


def on_exit(server):
    if (_metrics_dir / _TEMPORARY_MARK).exists():
        shutil.rmtree(_metrics_dir, ignore_errors=True)
