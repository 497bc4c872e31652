"""Redis key names of the MSD kind (besides its jobs, which the job layer keys).

* ``P:trace:msd:tqids:<trace_query_id>`` -- hash owner scope -> the id of the MSD job that
  answers a trace_query_id.
* ``P:trace:msd:<job_id>:cid:<domain>`` -- hash CID -> its packed record in one domain, as its
  events unit found it: backward, a lineage node's own machines and materials; forward, a
  defect lot's downstream record (a re-run rewrites the same fields).
* ``P:trace:msd:<job_id>:rows`` -- hash row id -> one stored detail row (msgpack).
* ``P:trace:msd:<job_id>:order:<sort_key>`` -- packed uint32 row ids, ascending by the key.

Everything here expires with the job (``TRACE_JOB_TTL_SECONDS``). None of these keys has a
hash tag: no script or MULTI touches two of them, so on a Redis Cluster each lands on its own
slot and a large MSD job's rows and lookups spread over the shards (docs/keys.md).
"""

from __future__ import annotations


class MsdKeys:
    """Key names of the MSD kind under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def index(self, trace_query_id: str) -> str:
        """Hash: owner scope (:func:`tracebus.trace.owners.scope`) -> the job id of an MSD
        trace_query_id. Per owner: the id is a hash of the request, so anyone can compute it."""
        return f"{self.prefix}:trace:msd:tqids:{trace_query_id}"

    def cids(self, job_id: str, domain: str) -> str:
        """Hash: CID -> its packed record in ``domain``."""
        return f"{self.prefix}:trace:msd:{job_id}:cid:{domain}"

    def rows(self, job_id: str) -> str:
        """Hash: row id -> packed detail row."""
        return f"{self.prefix}:trace:msd:{job_id}:rows"

    def order(self, job_id: str, sort_key: str) -> str:
        """String: packed uint32 row ids in ascending order of ``sort_key``."""
        return f"{self.prefix}:trace:msd:{job_id}:order:{sort_key}"
