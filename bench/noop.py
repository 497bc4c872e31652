"""The tracebus no-op actor the throughput benchmark drains (it only counts itself)."""

from tracebus import actor

from bench import counter


@actor(queue="bench", max_retries=0)
def noop(i):
    counter.tick()


@actor(queue="bench-slow", max_retries=0)
def sleeper(seconds, marker_key):
    """Record ``pid`` under ``marker_key`` (a Redis list), then sleep: the recovery probe."""
    import os
    import time

    import redis

    client = redis.Redis.from_url(os.environ[counter.URL_ENV])
    client.rpush(marker_key, f"{os.getpid()} {time.time()}")
    client.close()
    time.sleep(seconds)
