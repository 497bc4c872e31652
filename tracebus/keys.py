"""Every Redis key name tracebus uses, under one configurable prefix.

No other module builds a key by hand: they call a method here, so the whole key
space can be read (and its TTLs audited) in one place. Lua scripts receive the keys
through ``KEYS[]``; they never build names themselves.

Glossary (``P`` is the prefix):

* ``P:q:<queue>`` -- stream of work entries; consumer group :data:`GROUP`.
* ``P:q:<queue>:delayed`` -- zset of encoded messages scored by due time (ms).
* ``P:q:<queue>:dead`` -- dead-letter stream (capped, expires).
* ``P:queues`` -- set of declared queue names.
* ``P:worker:<consumer>`` -- hash describing a live worker (expires).
* ``P:workers`` -- zset consumer -> last-seen ms, for listing workers.
* ``P:stats`` -- hash of cumulative counters and the job-duration histogram, read by
  ``GET /metrics`` (:mod:`tracebus.metrics` lists its fields). It has **no TTL on purpose**:
  it is system-wide state like the queue streams, a few dozen fields whatever the load
  (fields are per queue and per job status, never per job or worker), and Prometheus
  computes rates from its counters, which an expiry would reset. Deleting it by hand only
  resets the counters (Prometheus treats that as a counter reset).
* ``P:jobs:status:<status>`` -- per job status, zset job id -> expiry ms of the job
  hash: the cheap "jobs by status" count (ZCOUNT from now). Written by the job scripts,
  pruned as members pass their expiry, and expires itself after the job TTL.
* ``P:job:<id>:...`` -- trace-job state and results (all expire; see tracebus.trace).
* ``P:rate:<bucket>:<caller>`` -- the API's fixed-window rate-limit counters (expire with
  their window).
"""

from __future__ import annotations

#: Name of the one consumer group on every work stream.
GROUP = "workers"


class Keys:
    """Key names under one prefix.

    Args:
        prefix(str): the namespace, e.g. ``"tracebus"``.
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    # -- queue ---------------------------------------------------------------------------------
    def stream(self, queue: str) -> str:
        return f"{self.prefix}:q:{queue}"

    def delayed(self, queue: str) -> str:
        return f"{self.prefix}:q:{queue}:delayed"

    def dead(self, queue: str) -> str:
        return f"{self.prefix}:q:{queue}:dead"

    def queues(self) -> str:
        return f"{self.prefix}:queues"

    # -- workers -------------------------------------------------------------------------------
    def worker(self, consumer: str) -> str:
        return f"{self.prefix}:worker:{consumer}"

    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def stats(self) -> str:
        """Hash of cumulative counters and the job-duration histogram (no TTL: see the glossary)."""
        return f"{self.prefix}:stats"

    # -- trace jobs ----------------------------------------------------------------------------
    def job(self, job_id: str) -> str:
        """Hash: the job's spec and state."""
        return f"{self.prefix}:job:{job_id}"

    def job_units(self, job_id: str) -> str:
        """Hash: unit index -> packed unit state."""
        return f"{self.prefix}:job:{job_id}:units"

    def job_todo(self, job_id: str) -> str:
        """List: unit indexes not yet sent to the queue (the per-job in-flight cap)."""
        return f"{self.prefix}:job:{job_id}:todo"

    def job_cids(self, job_id: str) -> str:
        """Hash: CID chunk index -> msgpack list of that chunk's container ids."""
        return f"{self.prefix}:job:{job_id}:cids"

    def job_manifest(self, job_id: str, domain: str) -> str:
        """Hash: unit index -> msgpack list of rows per stored chunk."""
        return f"{self.prefix}:job:{job_id}:manifest:{domain}"

    def job_chunk(self, job_id: str, domain: str, unit: int, part: int) -> str:
        """String: one msgpack chunk of rows."""
        return f"{self.prefix}:job:{job_id}:chunk:{domain}:{unit}:{part}"

    def job_progress(self, job_id: str) -> str:
        """Stream of progress events (for SSE), capped and expiring."""
        return f"{self.prefix}:job:{job_id}:progress"

    def jobs_index(self) -> str:
        """Zset job id -> created ms (listing); members are pruned as their jobs expire, and the
        key expires 2 x the job TTL after the newest job was created."""
        return f"{self.prefix}:jobs"

    def jobs_by_status(self, status: str) -> str:
        """Zset job id -> expiry ms of the jobs in ``status`` (counts for ``/metrics``; expires)."""
        return f"{self.prefix}:jobs:status:{status}"

    def user_jobs(self, user: str) -> str:
        """Zset of a user's in-flight job ids (quota)."""
        return f"{self.prefix}:user:{user}:inflight"

    def singleflight(self, fingerprint: str) -> str:
        """String: job id of the in-flight job with this request fingerprint."""
        return f"{self.prefix}:singleflight:{fingerprint}"

    # -- API -----------------------------------------------------------------------------------
    def rate(self, bucket: str, caller: str) -> str:
        """String: a caller's hit count in the current fixed window of a rate-limit bucket
        (expires with the window; see api/ratelimit.py)."""
        return f"{self.prefix}:rate:{bucket}:{caller}"
