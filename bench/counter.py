"""Counting task executions honestly in every system, without a Redis round trip per task.

Each benchmark no-op task (tracebus, RQ, Dramatiq, Celery) calls :func:`tick`. It bumps
an in-process count and notes the time; a daemon thread, started in each process on
its first tick, writes them to the hash :data:`KEY` every :data:`FLUSH_S`
(``c:<proc>`` count, ``f:<proc>`` first tick, ``l:<proc>`` last tick, Unix seconds).
The bench sums the counts with :func:`total` and takes the drain window from the
task bodies themselves with :func:`window`: the count comes from tasks that actually
ran, never from queue arithmetic, and the flush lag does not enter the timing.

A process that ends right after its task (RQ's forking work horse) cannot rely on the
thread: ``tick(flush_now=True)`` writes at once (HINCRBY; a round trip per task).
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import redis

#: Hash of per-process execution counts and first/last tick times.
KEY = "bench:executed"
#: Environment variable naming the Redis the counts go to.
URL_ENV = "BENCH_COUNTER_URL"
#: Set to 1 in processes that exit right after their task (see module docstring).
DIRECT_ENV = "BENCH_COUNTER_DIRECT"
FLUSH_S = 0.01

_pid = None
_counter = itertools.count(1)
_count = 0
_first = 0.0
_last = 0.0
_lock = threading.Lock()


def _client() -> redis.Redis:
    return redis.Redis.from_url(os.environ[URL_ENV])


def _flusher(proc: str) -> None:
    client = _client()
    written = 0
    idle = threading.Event()
    client.hset(KEY, f"f:{proc}", repr(_first))
    while True:
        idle.wait(FLUSH_S)
        if _count != written:
            count, last = _count, _last
            client.hset(KEY, mapping={f"c:{proc}": count, f"l:{proc}": repr(last)})
            written = count


def _start() -> None:
    global _pid, _counter, _count, _first
    with _lock:
        if _pid == os.getpid():
            return
        _counter, _count, _first = itertools.count(1), 0, time.time()
        proc = f"{os.getpid()}-{os.urandom(3).hex()}"
        threading.Thread(target=_flusher, args=(proc,), name="bench-counter", daemon=True).start()
        _pid = os.getpid()


def _tick_direct() -> None:
    now = repr(time.time())
    with _client().pipeline(transaction=False) as pipe:
        pipe.hincrby(KEY, "c:direct", 1)
        pipe.hsetnx(KEY, "f:direct", now)
        pipe.hset(KEY, "l:direct", now)
        pipe.execute()


def tick() -> None:
    """Count one execution of a benchmark task in this process."""
    global _count, _last
    if _pid != os.getpid():
        if os.environ.get(DIRECT_ENV) == "1":
            return _tick_direct()
        _start()
    _count = next(_counter)  # itertools.count is atomic under the GIL: thread-safe
    _last = time.time()


def _fields(client: redis.Redis) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(KEY).items()}


def total(client: redis.Redis) -> int:
    """Executions counted so far, over every process."""
    return sum(int(v) for k, v in _fields(client).items() if k.startswith("c:"))


def window(client: redis.Redis) -> tuple[float, float]:
    """(first, last) tick times over every process, Unix seconds."""
    fields = _fields(client)
    firsts = [float(v) for k, v in fields.items() if k.startswith("f:")]
    lasts = [float(v) for k, v in fields.items() if k.startswith("l:")]
    return min(firsts), max(lasts)


def reset(client: redis.Redis) -> None:
    client.delete(KEY)
