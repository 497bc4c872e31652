"""Every Redis key name of the job layer, under the engine's prefix.

Glossary (``P`` is the prefix, ``<id>`` a job id). Every key of a job expires
(``TRACE_JOB_TTL_SECONDS`` after its last write; a finished or retried job's keys get a
fresh full TTL, the job hash last). A key's hash tag (``{...}``) decides its Redis Cluster slot:
a job's control keys share the job's tag ``{<id>}`` (every job script runs in that slot),
its result chunks each carry their own tag (unit and attempt), so one large result
spreads over the shards; a user's admission keys share ``{<user>}``, the system-wide job
figures share ``{jobs}``. No script touches two tags (docs/keys.md maps them):

* ``P:job:{<id>}`` -- hash: the job's spec, plan, counters and status.
* ``P:job:{<id>}:units`` -- hash unit -> packed unit state (state, attempt, rows, times).
* ``P:job:{<id>}:todo`` -- list of units not yet sent (the per-job in-flight cap).
* ``P:job:{<id>}:inputs`` -- hash item-chunk index -> the chunk's msgpack input (e.g. CIDs).
* ``P:job:{<id>}:manifest:<section>`` -- hash unit -> msgpack ``[attempt, [rows per chunk]]``
  of the committed attempt: the fenced commit that makes a unit's chunks visible.
* ``P:job:{<id>:<section>:<unit>:<attempt>}:<part>`` -- one msgpack chunk of result rows of
  one unit attempt (its own tag: chunks spread; a stale attempt writes keys never committed).
* ``P:job:{<id>:<section>:<unit>:<attempt>}:<part>:parquet`` -- the chunk's columnar copy
  (:mod:`tracebus.jobs.columnar`), under the chunk's tag: written in one MULTI with it.
* ``P:job:{<id>}:partials`` -- hash unit -> the unit's fenced partial aggregate.
* ``P:job:{<id>}:artifact:<name>`` -- a value the job's kind stores once for the whole job
  (an aggregation, a lookup the units share).
* ``P:job:{<id>}:progress`` -- stream of progress events (SSE), capped.
* ``P:job:{<id>}:joined`` -- set of the jobs of other users that joined this one while it ran
  (they end when it ends: :mod:`tracebus.jobs.reuse`).
* ``P:{jobs}:index`` -- zset job id -> created ms (listing); expires 2 x the job TTL after the newest
  job or status change (a retried job's hash lives on past its creation's).
* ``P:{jobs}:status:<status>`` -- zset job id -> expiry ms, the cheap "jobs by status" count.
* ``P:{jobs}:stats`` -- hash of the jobs' cumulative counters and the duration histogram
  (no TTL, like the engine's stats hashes: a few dozen fields, counters Prometheus rates).
* ``P:reuse:{<result key>}`` -- hash: the completed result of a request's reuse key
  (:attr:`tracebus.jobs.spec.JobSpec.result_key`): the job holding its keys, the result's own
  id, when it completed and the fields a job reusing it copies; expires with those keys (each
  reuse gives both a fresh full TTL).
* ``P:user:{<user>}:inflight`` -- zset of a user's in-flight jobs (quota).
* ``P:user:{<user>}:sf:<fingerprint>`` -- the in-flight job id of an identical request of
  that user (single-flight is per user: a user only ever sees their own jobs).
* ``P:user:{<user>}:spent`` / ``:spent-until`` -- bytes the user's jobs and answers hold in
  Redis, per owner, and when each owner's bytes expire (the budget).
* ``P:{places:<pool>}:held`` / ``:waiting`` / ``:info`` -- a pool of places (the source's
  session cap, :mod:`tracebus.jobs.places`): zsets holder -> lease expiry of the places in use
  and of the units waiting for one, and a hash holder -> its fairness group and when it asked;
  every write renews their expiry.
"""

from __future__ import annotations


class JobKeys:
    """Key names of jobs under one prefix.

    Args:
        prefix(str): the namespace, e.g. ``"tracebus"`` (the engine's ``TRACEBUS_KEY_PREFIX``).
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "tracebus"):
        self.prefix = prefix

    def job(self, job_id: str) -> str:
        """Hash: the job's spec and state."""
        return f"{self.prefix}:job:{{{job_id}}}"

    def job_units(self, job_id: str) -> str:
        """Hash: unit index -> packed unit state."""
        return f"{self.prefix}:job:{{{job_id}}}:units"

    def job_todo(self, job_id: str) -> str:
        """List: unit indexes not yet sent to the queue (the per-job in-flight cap)."""
        return f"{self.prefix}:job:{{{job_id}}}:todo"

    def job_inputs(self, job_id: str) -> str:
        """Hash: item-chunk index -> msgpack input of that chunk (e.g. its container ids)."""
        return f"{self.prefix}:job:{{{job_id}}}:inputs"

    def job_manifest(self, job_id: str, section: str) -> str:
        """Hash: unit index -> msgpack list of rows per stored chunk."""
        return f"{self.prefix}:job:{{{job_id}}}:manifest:{section}"

    def job_chunk(self, job_id: str, section: str, unit: int, part: int, attempt: int) -> str:
        """String: one msgpack chunk of rows of one unit attempt, under its own hash tag."""
        return f"{self.prefix}:job:{{{job_id}:{section}:{unit}:{attempt}}}:{part}"

    def job_chunk_copy(self, job_id: str, section: str, unit: int, part: int, attempt: int) -> str:
        """String: the columnar copy of one chunk (same tag as the chunk: one MULTI writes both)."""
        return self.job_chunk(job_id, section, unit, part, attempt) + ":parquet"

    def job_scan(self, job_id: str) -> str:
        """SCAN pattern of every key of one job, control keys and chunks."""
        return f"{self.prefix}:job:{{{job_id}[}}:]*"

    def job_progress(self, job_id: str) -> str:
        """Stream of progress events (for SSE), capped and expiring."""
        return f"{self.prefix}:job:{{{job_id}}}:progress"

    def job_summary_tick(self, job_id: str) -> str:
        """String: present while a worker's progress summary of the job is recent (expires)."""
        return f"{self.prefix}:job:{{{job_id}}}:summary"

    def jobs_index(self) -> str:
        """Zset job id -> created ms (listing); members are pruned as their jobs expire, and the
        key expires 2 x the job TTL after the newest job was created or changed status."""
        return f"{self.prefix}:{{jobs}}:index"

    def jobs_by_status(self, status: str) -> str:
        """Zset job id -> expiry ms of the jobs in ``status`` (counts for ``/metrics``; expires)."""
        return f"{self.prefix}:{{jobs}}:status:{status}"

    def user_jobs(self, user: str) -> str:
        """Zset of a user's in-flight job ids (quota)."""
        return f"{self.prefix}:user:{{{user}}}:inflight"

    def singleflight(self, fingerprint: str, user: str) -> str:
        """String: job id of the user's in-flight job with this request fingerprint (the user's
        tag, so admission checks it and the quota in one script)."""
        return f"{self.prefix}:user:{{{user}}}:sf:{fingerprint}"

    def user_spent(self, user: str) -> str:
        """Hash: owner (a job id, or an answer kept for the user) -> bytes it stored in Redis
        (the user's budget, ``TRACE_USER_MAX_BYTES``)."""
        return f"{self.prefix}:user:{{{user}}}:spent"

    def user_spent_until(self, user: str) -> str:
        """Zset: owner -> when its bytes expire (unix ms), so the budget forgets them then."""
        return f"{self.prefix}:user:{{{user}}}:spent-until"

    def job_partials(self, job_id: str) -> str:
        """Hash: unit -> the unit's fenced partial aggregate (msgpack)."""
        return f"{self.prefix}:job:{{{job_id}}}:partials"

    def job_joined(self, job_id: str) -> str:
        """Set: the jobs of other users that joined this one in flight (:mod:`tracebus.jobs.reuse`)."""
        return f"{self.prefix}:job:{{{job_id}}}:joined"

    def job_artifact(self, job_id: str, name: str) -> str:
        """String: a value stored once for the whole job (an aggregation, a shared lookup)."""
        return f"{self.prefix}:job:{{{job_id}}}:artifact:{name}"

    def result(self, result_key: str) -> str:
        """Hash: the reusable completed result of ``result_key`` (its own tag)."""
        return f"{self.prefix}:reuse:{{{result_key}}}"

    def places(self, pool: str) -> tuple[str, str, str]:
        """The held zset, waiting zset and info hash of a pool of places, under one tag."""
        base = f"{self.prefix}:{{places:{pool}}}"
        return f"{base}:held", f"{base}:waiting", f"{base}:info"

    def sweep_lock(self) -> str:
        """String: the supervisor sweeping stranded jobs now (SET NX PX: one sweep at a time)."""
        return f"{self.prefix}:jobs:sweep-lock"

    def stats(self) -> str:
        """Hash of the jobs' cumulative counters and duration histogram (no TTL: see the glossary)."""
        return f"{self.prefix}:{{jobs}}:stats"
