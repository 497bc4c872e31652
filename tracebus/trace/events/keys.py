"""Redis key names of the events kind (besides its jobs, which the job layer keys).

A trace's one read of DW_MES_JOB for its ``jobs`` domain (:mod:`tracebus.trace.events.jobs_domain`):

* ``P:trace:jobs:<job_id>:lease`` -- the token of the unit reading DW_MES_JOB for the job's
  jobs domain; lapses 10 s after its last renewal.
* ``P:trace:jobs:<job_id>:done`` -- msgpack ``{"t": token, "n": {chunk: parts}}`` once that read ended.
* ``P:trace:jobs:<job_id>:<token>:<chunk>:<part>`` -- msgpack rows of one chunk's jobs, until
  the chunk's unit wrote them.

Everything here expires with the job (``TRACE_JOB_TTL_SECONDS``). None of these keys has a
hash tag: no script or MULTI touches two of them (docs/keys.md).
"""

from __future__ import annotations


class EventsKeys:
    """Key names of the events kind under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def jobs_lease(self, job_id: str) -> str:
        """String: the token of the unit reading DW_MES_JOB for the job (PX lease)."""
        return f"{self.prefix}:trace:jobs:{job_id}:lease"

    def jobs_done(self, job_id: str) -> str:
        """String: msgpack ``{"t": token, "n": {chunk: parts}}`` of the finished read."""
        return f"{self.prefix}:trace:jobs:{job_id}:done"

    def jobs_part(self, job_id: str, token: str, chunk: int, part: int) -> str:
        """String: msgpack rows of one chunk's jobs, stored by the read of ``token``."""
        return f"{self.prefix}:trace:jobs:{job_id}:{token}:{chunk}:{part}"
