"""The no-op actor the throughput benchmark drains."""

from tracebus import actor


@actor(queue="bench", max_retries=0)
def noop(i):
    pass
