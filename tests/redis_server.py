"""The test suite's private redis-server; the class lives in :mod:`tracebus.redis_proc`."""

from tracebus.redis_proc import RedisServer, SentinelGroup, free_port

__all__ = ["RedisServer", "SentinelGroup", "free_port"]
