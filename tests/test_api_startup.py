"""The API refuses to start on a Redis that may evict keys (gunicorn's on_starting hook)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]


def test_gunicorn_refuses_an_evicting_redis_with_a_clear_message(tmp_path):
    # Given a Redis configured to evict keys under memory pressure
    server = RedisServer(tmp_path / "redis", extra_args=("--maxmemory-policy", "allkeys-lru")).start()
    try:
        env = dict(os.environ, REDIS_URL=server.url, TRACEBUS_API_BIND="127.0.0.1:0",
                   TRACEBUS_METRICS_DIR=str(tmp_path / "metrics"))
        # When the API is started against it
        proc = subprocess.run(
            [sys.executable, "-m", "gunicorn", "-c", "api/gunicorn.conf.py", "api.app:get_app()"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        # Then gunicorn exits non-zero, naming the setting and the fix
        assert proc.returncode != 0
        assert "maxmemory-policy" in proc.stderr and "noeviction" in proc.stderr, proc.stderr[-2000:]
    finally:
        server.stop()
