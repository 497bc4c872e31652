"""Redis key names of the HTTP API, under the engine's prefix.

* ``P:rate:<bucket>:<caller>`` -- a caller's hit count in the current fixed window of a
  rate-limit bucket (expires with the window; see :mod:`api.ratelimit`). Its MULTI touches
  this one key only, so it needs no hash tag on a Redis Cluster (docs/keys.md).
"""

from __future__ import annotations


class ApiKeys:
    """Key names of the API under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def rate(self, bucket: str, caller: str) -> str:
        """String: a caller's hit count in the current window of a rate-limit bucket."""
        return f"{self.prefix}:rate:{bucket}:{caller}"
