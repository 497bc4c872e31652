"""Actors used by the process tests (imported by real worker processes).

They record what they do in Redis under ``<prefix>:test:*`` through the worker's own
broker, so a test can see which messages ran, how often, and in which process.
"""

from __future__ import annotations

import os
import time

import tracebus
from tracebus import actor
from tracebus import get_broker


def _key(name: str) -> str:
    return f"{get_broker().keys.prefix}:test:{name}"


@actor(queue="tests")
def record(n):
    """Count a run of message ``n`` (a hash n -> runs) and the pid that ran it."""
    client = get_broker().client
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(_key("runs"), n, 1)
    pipe.sadd(_key("pids"), os.getpid())
    pipe.execute()


@actor(queue="tests", time_limit_ms=60_000)
def slow_record(n, seconds):
    """Like record, but takes ``seconds`` first (heartbeating), marking when it started."""
    client = get_broker().client
    client.hset(_key("started"), n, os.getpid())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tracebus.heartbeat()
        time.sleep(0.05)
    client.hincrby(_key("runs"), n, 1)


@actor(queue="tests", max_retries=3, min_backoff_ms=50, max_backoff_ms=200)
def flaky(n, failures):
    """Fails its first ``failures`` runs, then succeeds."""
    client = get_broker().client
    attempt = client.hincrby(_key("attempts"), n, 1)
    if attempt <= failures:
        raise RuntimeError(f"planned failure {attempt}")
    client.hincrby(_key("runs"), n, 1)


@actor(queue="tests", max_retries=0)
def always_fails(n):
    raise ValueError(f"broken message {n}")


@actor(queue="tests", time_limit_ms=300)
def overruns(n):
    """Runs past its soft time limit in Python code: TimeLimitExceeded interrupts it."""
    get_broker().client.hincrby(_key("attempts"), n, 1)
    time.sleep(5)
    get_broker().client.hincrby(_key("runs"), n, 1)


@actor(queue="tests", time_limit_ms=200, max_deliveries=2)
def stuck(n):
    """Ignores the soft limit (blocks SIGALRM) so only the supervisor's hard kill stops it."""
    import signal

    get_broker().client.hincrby(_key("attempts"), n, 1)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tracebus.heartbeat()
        time.sleep(0.05)


@actor(queue="tests")
def hog(n, megabytes):
    """Keeps ``megabytes`` alive in the process (to trigger RSS recycling)."""
    _hoard.append(bytearray(megabytes << 20))
    get_broker().client.hincrby(_key("runs"), n, 1)


_hoard: list = []


@actor(queue="tests", max_deliveries=1)
def silent(n, seconds):
    """Sleeps without calling tracebus.heartbeat: the supervisor sees a hung worker."""
    client = get_broker().client
    client.hset(_key("started"), n, os.getpid())
    time.sleep(seconds)
    client.hincrby(_key("runs"), n, 1)


class Audit(tracebus.Middleware):
    """A middleware installed from the command line: counts the messages it saw run, per actor,
    and the failures offered to it (it settles none)."""

    def after_process(self, worker, actor, message, error):
        worker.broker.client.hincrby(_key("audit"), f"{actor.actor_name}:{'error' if error else 'ok'}", 1)


@actor(queue="tests", store_results=True, max_retries=0)
def add(a, b):
    """Returns a + b: its result is stored."""
    return a + b


@actor(queue="tests", store_results=True, max_retries=1, min_backoff_ms=10, max_backoff_ms=20)
def fails_with_result(n):
    """Always raises; stores its failure once its one retry is spent."""
    get_broker().client.hincrby(_key("attempts"), n, 1)
    raise KeyError(f"no such thing {n}")


@actor(queue="tests", store_results=True, result_ttl_ms=1500)
def unstorable():
    return object()
