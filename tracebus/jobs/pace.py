"""How fast recent jobs of a kind ran: the wall seconds per unit of the last completed ones.

A submit's ``estimated_seconds`` is its units times this pace, so the estimate follows the
machine, the source and the load as they are now rather than a constant timed once
(issue 39: the constant said 7 s for a 13.8 s job). The pace is read from the jobs index
and the job hashes the job layer keeps anyway (nothing is written for it): of the newest
:data:`SCANNED` jobs, those of ``kind`` run by ``actor`` that completed on their own (not
answered from another job's result), at most :data:`RECENT` of them, their wall time
(first unit taken to the end) summed over their units summed, so a large job weighs as
much as its units.
"""

from __future__ import annotations

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.states import JobState

#: Newest jobs of the index looked at, and completed jobs of the kind used at most.
SCANNED, RECENT = 200, 20
_FIELDS = ("actor", "status", "started_ms", "finished_ms", "units_total", "data_of")


def unit_seconds(redis, keys, kind: str, actor: str) -> float | None:
    """Wall seconds per unit of the recent completed jobs of ``kind`` run by ``actor``, or None
    when there are none (yet, or any more: they expired)."""
    with redis_errors():
        ids = [i.decode() for i in redis.zrevrange(keys.jobs_index(), 0, SCANNED - 1)]
        ids = [i for i in ids if i.startswith(kind + "-")]
        if not ids:
            return None
        pipe = redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(keys.job(job_id), _FIELDS)
        replies = pipe.execute()
    seconds = units = 0.0
    used = 0
    for values in replies:
        got = dict(zip(_FIELDS, (v.decode() if v is not None else None for v in values)))
        if (got["actor"] != actor or got["status"] != JobState.COMPLETED.value or got["data_of"]
                or not got["started_ms"] or not got["finished_ms"] or not got["units_total"]):
            continue
        seconds += max(0, int(got["finished_ms"]) - int(got["started_ms"])) / 1000
        units += int(got["units_total"])
        used += 1
        if used == RECENT:
            break
    return seconds / units if units and seconds else None
