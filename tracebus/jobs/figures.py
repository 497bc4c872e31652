"""The system-wide job figures of ``GET /metrics``: counters, duration histogram, status zsets.

They live under the ``{jobs}`` hash tag (:class:`tracebus.jobs.keys.JobKeys`), apart from
every job's own slot, so no job script touches them: a job script returns what changed
and :meth:`JobFigures.record` files it right after with ``job_metrics.lua``. The figures
are counts, not state: a process dying between the two steps loses one increment and
nothing else (a status zset member expires with its job's TTL).
"""

from __future__ import annotations

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.scripts import script
from tracebus.jobs.states import STATES

#: Upper bounds (seconds) of the job-duration histogram's buckets (plus +Inf). Jobs run from
#: seconds to ``TRACE_JOB_TIMEOUT_SECONDS`` (30 min by default). Changing them starts the
#: new buckets from zero: delete the ``job_duration_*`` fields of the stats hash with them.
JOB_DURATION_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
_BOUNDS_MS = ",".join(str(b * 1000) for b in JOB_DURATION_BUCKETS_S)


class JobFigures:
    """Files job transitions in the ``{jobs}`` figures.

    Args:
        redis: the client (one node or a cluster).
        keys(JobKeys): key names.
        ttl_s(int): the job TTL (status zset scores and TTLs follow it).
    """

    def __init__(self, redis, keys: JobKeys, ttl_s: int):
        self.keys, self.ttl_s = keys, ttl_s
        self._script = script(redis, "job_metrics")
        self._keys = {"stats": keys.stats(), "by_status": [keys.jobs_by_status(s) for s in STATES],
                      "index": keys.jobs_index()}

    def record(self, job_id: str, now_ms: int, old: str | None = None, new: str | None = None,
               duration_ms: int | None = None, created: bool = False, ttl_s: int | None = None,
               **counters: int) -> None:
        """One transition of ``job_id``: ``old`` -> ``new`` status (None: no change),
        ``duration_ms`` of a job that just finished, ``created`` adds it to the jobs index,
        ``counters`` are added to the stats hash."""
        pairs = [x for field, n in counters.items() if n for x in (field, n)]
        args = {"job_id": job_id, "old": old or "", "new": new or "", "now_ms": now_ms,
                "ttl_s": self.ttl_s if ttl_s is None else ttl_s,
                "duration_ms": "" if duration_ms is None else duration_ms, "bounds_ms": _BOUNDS_MS,
                "created_ms": now_ms if created else "", "counters": pairs}
        with redis_errors():
            self._script(self._keys, args)

    def count(self, **counters: int) -> None:
        """Add ``counters`` to the stats hash, no job transition with them."""
        self.record("", 0, **counters)

    def forget(self, job_id: str, now_ms: int, **counters: int) -> None:
        """``job_id`` was rolled back (``job_abandon.lua``): out of the status zsets and the
        index; ``counters`` are added to the stats hash."""
        self.record(job_id, now_ms, new="gone", **counters)

    def refile(self, job_id: str, now_ms: int, status: str, ttl_s: int) -> None:
        """File ``job_id`` under ``status`` alone, scored by its hash's remaining ``ttl_s``:
        the sweeper's repair when a transition's figure was lost with the process that made
        it (a job final in its hash but still counted as running, or the reverse)."""
        self.record(job_id, now_ms, old="*", new=status, ttl_s=max(1, ttl_s))
