"""The systems the throughput benchmark compares, one module each, with the same no-op task.

Each module holds the system's no-op task (which calls :func:`bench.counter.tick`, so
every system counts executions the same way) and a ``Driver`` class:

* ``Driver(url)`` -- set up the client side against the Redis at ``url``;
* ``NAME`` -- the system's name in tables;
* ``enqueue_one(n)`` -- ``n`` calls of the one-message enqueue API;
* ``enqueue_bulk(n)`` -- the bulk API, or ``BULK = None`` when there is none;
* ``configs() -> {label: [argv, ...]}`` -- worker commands (one argv per process to
  start) for each drain configuration;
* ``worker_env() -> dict`` -- extra environment for the workers;
* ``remaining(client) -> int`` -- messages still waiting or delivered-but-unacked.

Workers import these modules, so they set their broker up from the environment
(:data:`bench.counter.URL_ENV`) at import time.
"""

from __future__ import annotations

import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def python_m(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]
