"""Redis key names the trace application's kinds share (besides its jobs, which the job layer
keys; each kind keys its own: :mod:`tracebus.trace.events.keys`, :mod:`tracebus.trace.msd.keys`).

* ``P:trace:lineage:<query_id>`` -- a lineage stage's answer (msgpack), kept so the events
  stage can find it by ``lineage_query_id``; expires after ``TRACE_JOB_TTL_SECONDS``.

It has no hash tag: no script or MULTI touches it with another key (docs/keys.md).
"""

from __future__ import annotations


class TraceKeys:
    """Key names the trace application's kinds share, under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def lineage(self, query_id: str) -> str:
        """String: the msgpack answer of a lineage stage."""
        return f"{self.prefix}:trace:lineage:{query_id}"
