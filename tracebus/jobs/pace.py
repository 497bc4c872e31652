"""How fast recent jobs of a kind ran: the wall seconds per unit of each section, and overall.

A submit's ``estimated_seconds`` is its units at this pace, so the estimate follows the machine,
the source and the load as they are now rather than a constant timed once (issue 39: the
constant said 7 s for a 13.8 s job). Sections cost very different amounts per unit (a trace's
history unit reads 130 times the rows of its holds unit), so the pace is kept per section: a job
whose sections differ from the recent ones' is estimated from its own sections' pace, not from
the others' (one figure per kind said 141 s for a 64.6 s job after two history + materials jobs).

The pace is read from the jobs index and the job hashes the job layer keeps anyway: of the
newest :data:`SCANNED` jobs, those of ``kind`` run by ``actor`` that completed on their own (not
answered from another job's result, never retried), at most :data:`RECENT` of them. A job's wall
time (first unit taken to the end) is shared among its sections in proportion to the
milliseconds their done units ran (``sms:<i>``, written when a unit settles), so a section's pace
counts the parallelism and the waits of the jobs it ran in; a job that has no such counts (it
ran before they were written) shares its wall time by its sections' units.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.states import JobState

#: Newest jobs of the index looked at, and completed jobs of the kind used at most.
SCANNED, RECENT = 200, 20
_FIELDS = ("actor", "status", "started_ms", "finished_ms", "units_total", "data_of", "retried_ms",
           "sections", "n_chunks")


@dataclass(frozen=True)
class Pace:
    """The pace of the recent completed jobs of a kind.

    Attributes:
        sections(dict[str, float]): wall seconds per unit of each section they ran.
        units(dict[str, int]): the units of each section they ran.
        overall(float): wall seconds per unit over all of them.
    """

    sections: dict[str, float]
    units: dict[str, int]
    overall: float

    def unit_seconds(self, section: str, weights: Mapping[str, float] | None = None) -> float:
        """Wall seconds per unit of ``section``: its own pace when recent jobs ran it; else, with
        ``weights`` (the kind's relative work per unit of each section) covering it and a section
        that ran, the ran sections' seconds per weight times its weight; else :attr:`overall`."""
        if section in self.sections:
            return self.sections[section]
        weights = weights or {}
        known = [s for s in self.sections if weights.get(s)]
        if weights.get(section) and known:
            seconds = sum(self.sections[s] * self.units[s] for s in known)
            weight = sum(weights[s] * self.units[s] for s in known)
            return weights[section] * seconds / weight
        return self.overall


def recent(redis, keys, kind: str, actor: str) -> Pace | None:
    """The pace of the recent completed jobs of ``kind`` run by ``actor``, or None when there are
    none (yet, or any more: they expired)."""
    with redis_errors():
        jobs = _recent_completed(redis, keys, kind, actor)
        if not jobs:
            return None
        pipe = redis.pipeline(transaction=False)
        for job_id, got in jobs:
            pipe.hmget(keys.job(job_id), [f"sms:{i}" for i in range(len(json.loads(got["sections"])))])
        busy = pipe.execute()
    return _pace_of(jobs, busy)


def _recent_completed(redis, keys, kind: str, actor: str) -> list[tuple[str, dict]]:
    """(job id, its :data:`_FIELDS`) of the newest jobs of ``kind`` that count for the pace
    (:func:`_counts`), newest first: at most :data:`RECENT` of the :data:`SCANNED` newest."""
    ids = [i.decode() for i in redis.zrevrange(keys.jobs_index(), 0, SCANNED - 1)]
    ids = [i for i in ids if i.startswith(kind + "-")]
    if not ids:
        return []
    pipe = redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), _FIELDS)
    jobs = []
    for job_id, values in zip(ids, pipe.execute()):
        got = dict(zip(_FIELDS, (v.decode() if v is not None else None for v in values)))
        if _counts(got, actor):
            jobs.append((job_id, got))
            if len(jobs) == RECENT:
                break
    return jobs


def _counts(got: dict, actor: str) -> bool:
    """Whether the job whose :data:`_FIELDS` are ``got`` counts for ``actor``'s pace: run by it,
    completed on its own (not answered from another job's result, never retried), with its
    times, units and sections written."""
    return (got["actor"] == actor and got["status"] == JobState.COMPLETED.value
            and not got["data_of"] and not got["retried_ms"]
            and all(got[f] for f in ("started_ms", "finished_ms", "units_total", "sections", "n_chunks")))


def _pace_of(jobs: list[tuple[str, dict]], busy: list) -> Pace | None:
    """The :class:`Pace` of ``jobs`` (:func:`_recent_completed`) given each one's ``sms:<i>``
    (``busy``): each job's wall time shared among its sections by the milliseconds their units
    ran, or by their units when it has no such counts; None when they ran no time or no unit."""
    seconds: dict[str, float] = {}
    units: dict[str, int] = {}
    wall_total = units_total = 0.0
    for (_, got), ms in zip(jobs, busy):
        wall = max(0, int(got["finished_ms"]) - int(got["started_ms"])) / 1000
        sections, n_chunks = json.loads(got["sections"]), int(got["n_chunks"])
        ran = [int(m) if m is not None else 0 for m in ms]
        shares = ran if sum(ran) > 0 else [n_chunks] * len(sections)
        for section, share in zip(sections, shares):
            seconds[section] = seconds.get(section, 0.0) + wall * share / sum(shares)
            units[section] = units.get(section, 0) + n_chunks
        wall_total += wall
        units_total += int(got["units_total"])
    if not wall_total or not units_total:
        return None
    return Pace({s: seconds[s] / units[s] for s in seconds}, units, wall_total / units_total)
