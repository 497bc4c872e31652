"""Counting task executions honestly in every system, without a Redis round trip per task.

Each benchmark no-op task (tracebus, RQ, Dramatiq, Celery) calls :func:`tick`. It bumps
an in-process count; a daemon thread, started in each process on its first tick,
writes the count to the hash :data:`KEY` (one field per process) every
:data:`FLUSH_S`. The bench sums the hash with :func:`total`. The count comes from the
task bodies that actually ran, never from queue arithmetic; a flush lags by at most
``FLUSH_S``, which only makes every system look slightly slower.

A process that ends right after its task (RQ's forking work horse) must flush at once:
call ``tick(flush_now=True)``, which writes with HINCRBY instead.
"""

from __future__ import annotations

import itertools
import os
import threading

import redis

#: Hash of per-process execution counts.
KEY = "bench:executed"
#: Environment variable naming the Redis the counts go to.
URL_ENV = "BENCH_COUNTER_URL"
FLUSH_S = 0.01

_pid = None
_counter = itertools.count(1)
_last = 0
_lock = threading.Lock()


def _client() -> redis.Redis:
    return redis.Redis.from_url(os.environ[URL_ENV])


def _flusher(field: str) -> None:
    client = _client()
    written = 0
    event = threading.Event()
    while True:
        event.wait(FLUSH_S)
        if _last != written:
            written = _last
            client.hset(KEY, field, written)


def _start() -> None:
    global _pid, _counter, _last
    with _lock:
        if _pid == os.getpid():
            return
        _counter, _last = itertools.count(1), 0
        field = f"{os.getpid()}:{os.urandom(3).hex()}"
        threading.Thread(target=_flusher, args=(field,), name="bench-counter", daemon=True).start()
        _pid = os.getpid()


def tick(flush_now: bool = False) -> None:
    """Count one execution of a benchmark task in this process."""
    global _last
    if flush_now:
        _client().hincrby(KEY, "direct", 1)
        return
    if _pid != os.getpid():
        _start()
    _last = next(_counter)  # itertools.count is atomic under the GIL: thread-safe


def total(client: redis.Redis) -> int:
    """Executions counted so far, over every process."""
    return sum(int(v) for v in client.hvals(KEY))


def reset(client: redis.Redis) -> None:
    client.delete(KEY)
