"""Redis key names of the trace application (besides its jobs, which the job layer keys).

* ``P:trace:lineage:<query_id>`` -- a lineage stage's answer (msgpack), kept so the events
  stage can find it by ``lineage_query_id``; expires after ``TRACE_JOB_TTL_SECONDS``.
* ``P:trace:msd:tqid:<trace_query_id>`` -- the id of the MSD job that answers a trace_query_id.
* ``P:trace:msd:<job_id>:cid:<domain>`` -- hash CID -> its packed record in one domain, as its
  events unit found it: backward, a lineage node's own machines and materials; forward, a
  defect lot's downstream record (a re-run rewrites the same fields).
* ``P:trace:msd:<job_id>:rows`` -- hash row id -> one stored detail row (msgpack).
* ``P:trace:msd:<job_id>:order:<sort_key>`` -- packed uint32 row ids, ascending by the key.
* ``P:trace:jobs:<job_id>:lease`` -- the token of the unit reading DW_MES_JOB for the job's
  jobs domain (:mod:`tracebus.trace.events.jobs_domain`); lapses 10 s after its last renewal.
* ``P:trace:jobs:<job_id>:done`` -- msgpack ``{"t": token, "n": {chunk: parts}}`` once that read ended.
* ``P:trace:jobs:<job_id>:<token>:<chunk>:<part>`` -- msgpack rows of one chunk's jobs, until
  the chunk's unit wrote them.

Everything here expires with the job (``TRACE_JOB_TTL_SECONDS``). None of these keys has a
hash tag: no script or MULTI touches two of them, so on a Redis Cluster each lands on its
own slot and a large MSD job's rows and lookups spread over the shards (docs/keys.md).
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

    def msd_index(self, trace_query_id: str) -> str:
        """Hash: owner scope (:func:`tracebus.trace.owners.scope`) -> the job id of an MSD
        trace_query_id. Per owner: the id is a hash of the request, so anyone can compute it."""
        return f"{self.prefix}:trace:msd:tqids:{trace_query_id}"

    def msd_cids(self, job_id: str, domain: str) -> str:
        """Hash: CID -> its packed record in ``domain``."""
        return f"{self.prefix}:trace:msd:{job_id}:cid:{domain}"

    def msd_rows(self, job_id: str) -> str:
        """Hash: row id -> packed detail row."""
        return f"{self.prefix}:trace:msd:{job_id}:rows"

    def jobs_lease(self, job_id: str) -> str:
        """String: the token of the unit reading DW_MES_JOB for the job (PX lease)."""
        return f"{self.prefix}:trace:jobs:{job_id}:lease"

    def jobs_done(self, job_id: str) -> str:
        """String: msgpack ``{"t": token, "n": {chunk: parts}}`` of the finished read."""
        return f"{self.prefix}:trace:jobs:{job_id}:done"

    def jobs_part(self, job_id: str, token: str, chunk: int, part: int) -> str:
        """String: msgpack rows of one chunk's jobs, stored by the read of ``token``."""
        return f"{self.prefix}:trace:jobs:{job_id}:{token}:{chunk}:{part}"

    def msd_order(self, job_id: str, sort_key: str) -> str:
        """String: packed uint32 row ids in ascending order of ``sort_key``."""
        return f"{self.prefix}:trace:msd:{job_id}:order:{sort_key}"
