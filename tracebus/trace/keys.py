"""Redis key names of the trace application (besides its jobs, which the job layer keys).

* ``P:trace:lineage:<query_id>`` -- a lineage stage's answer (msgpack), kept so the events
  stage can find it by ``lineage_query_id``; expires after ``TRACE_JOB_TTL_SECONDS``.
"""

from __future__ import annotations


class TraceKeys:
    """Key names of the trace application under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def lineage(self, query_id: str) -> str:
        """String: the msgpack answer of a lineage stage."""
        return f"{self.prefix}:trace:lineage:{query_id}"
