"""The API as a real gunicorn process, for tests that need the server itself (slow clients,
schemathesis, metrics, the enveloped API): :func:`running_api` starts ``gunicorn -c
api/gunicorn.conf.py`` on a free port over the settings' Redis and key prefix (with the test
environment of :mod:`tests.api_support`); :func:`serving` runs it with an environment the test
builds. Both wait for ``/healthz`` and stop the process group at the end (quick shutdown).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator

from tests.api_support import API_ENV
from tests.helpers import wait_for
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def running_api(settings, log_path: Path, **env_overrides: str) -> Iterator[str]:
    """gunicorn serving the API; yields its base URL (``http://127.0.0.1:<port>``).

    Args:
        settings(ApiSettings): Redis URL, key prefix, SQLite path and queue of the app.
        log_path(Path): gunicorn's output (shown when it does not come up).
        env_overrides: more ``TRACEBUS_*`` variables (worker class, workers, keep-alive...).
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET", "PROMETHEUS"))}
    env.update(API_ENV, REDIS_URL=settings.redis_url, TRACEBUS_KEY_PREFIX=settings.key_prefix,
               TRACEBUS_SQLITE_PATH=settings.sqlite_path, TRACE_WORKER_QUEUE=settings.queue,
               TRACEBUS_API_BIND=f"127.0.0.1:{port}", TRACEBUS_METRICS_DIR=str(log_path.parent / "metrics"),
               **env_overrides)
    with serving(env, log_path) as url:
        yield url


@contextlib.contextmanager
def serving(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """``gunicorn -c api/gunicorn.conf.py`` with exactly ``env`` (``TRACEBUS_API_BIND`` names its
    port); yields its base URL once ``/healthz`` answers 200, and stops its process group."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "api/gunicorn.conf.py"], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    url = "http://" + env["TRACEBUS_API_BIND"]

    def healthy() -> bool:
        assert proc.poll() is None, f"gunicorn exited:\n{log_path.read_text(errors='replace')[-3000:]}"
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, 30, interval_s=0.1, message="gunicorn answering /healthz")
        yield url
    finally:
        # Quick shutdown (gunicorn's SIGQUIT): a graceful one would wait out the streams a test
        # left open (up to the graceful timeout); no test here checks the server's own stop.
        os.killpg(proc.pid, signal.SIGQUIT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
