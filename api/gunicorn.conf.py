"""gunicorn settings of the API, taken from :class:`tracebus.config.Settings` (the environment).

Run: ``gunicorn -c api/gunicorn.conf.py 'api.app:get_app()'``. Workers are ``gthread``:
a streamed result or an event stream holds one thread, not the whole worker, and idle
keep-alive connections wait in the worker's poller rather than in a thread. Each open
stream or SSE client holds a thread until it ends, so ``TRACEBUS_API_WORKERS x
TRACEBUS_API_THREADS`` is the number of concurrent streams. The app is loaded in each
worker after the fork (no ``preload_app``), so no Redis socket is shared between workers.
"""

from tracebus.config import Settings

_settings = Settings.from_env()

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
