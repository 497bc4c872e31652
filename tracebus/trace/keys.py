"""Redis key names of the trace application (besides its jobs, which the job layer keys, and
the MSD kind's, :mod:`tracebus.trace.msd.keys`).

* ``P:trace:lineage:<query_id>`` -- a lineage stage's answer (msgpack), kept so the events
  stage can find it by ``lineage_query_id``; expires after ``TRACE_JOB_TTL_SECONDS``.
* ``P:trace:jobs:<job_id>:lease`` -- the token of the unit reading DW_MES_JOB for the job's
  jobs domain (:mod:`tracebus.trace.events.jobs_domain`); lapses 10 s after its last renewal.
* ``P:trace:jobs:<job_id>:done`` -- msgpack ``{"t": token, "n": {chunk: parts}}`` once that read ended.
* ``P:trace:jobs:<job_id>:<token>:<chunk>:<part>`` -- msgpack rows of one chunk's jobs, until
  the chunk's unit wrote them.

Everything here expires with the job (``TRACE_JOB_TTL_SECONDS``). None of these keys has a
hash tag: no script or MULTI touches two of them, so on a Redis Cluster each lands on its
own slot (docs/keys.md).
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

    def jobs_lease(self, job_id: str) -> str:
        """String: the token of the unit reading DW_MES_JOB for the job (PX lease)."""
        return f"{self.prefix}:trace:jobs:{job_id}:lease"

    def jobs_done(self, job_id: str) -> str:
        """String: msgpack ``{"t": token, "n": {chunk: parts}}`` of the finished read."""
        return f"{self.prefix}:trace:jobs:{job_id}:done"

    def jobs_part(self, job_id: str, token: str, chunk: int, part: int) -> str:
        """String: msgpack rows of one chunk's jobs, stored by the read of ``token``."""
        return f"{self.prefix}:trace:jobs:{job_id}:{token}:{chunk}:{part}"
