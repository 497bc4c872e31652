"""A user's admission of jobs: single-flight and the in-flight quota, under the user's tag.

Both keys carry the user's hash tag (:meth:`tracebus.jobs.keys.JobKeys.user_jobs`,
:meth:`~tracebus.jobs.keys.JobKeys.singleflight`), so ``user_admit.lua`` checks and reserves
them in one step in the user's slot, before the job is created in its own slot;
``user_release.lua`` gives the place back when the job finishes or is cancelled, or when
its creation did not happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.scripts import script


@dataclass(frozen=True, slots=True)
class Admission:
    """Answer of :meth:`Admissions.admit`.

    Attributes:
        outcome(str): ``admitted``, ``existing`` (``existing`` names the in-flight twin,
            ``existing_since_ms`` when it was admitted, -1 when not known) or ``quota``
            (``inflight`` is the user's count).
        added(bool): the job id was added to the user's in-flight set by this call.
        sf_set(bool): the single-flight key was set by this call.
    """

    outcome: str
    existing: str = ""
    existing_since_ms: int = -1
    inflight: int = 0
    added: bool = False
    sf_set: bool = False


class Admissions:
    """Admission scripts of every user."""

    def __init__(self, redis, keys: JobKeys):
        self.keys = keys
        self._admit = script(redis, "user_admit")
        self._release = script(redis, "user_release")

    def admit(self, user: str, fingerprint: str, job_id: str, now_ms: int, ttl_s: int,
              max_inflight: int, retry: bool = False) -> Admission:
        """Reserve the user's place for ``job_id`` (a new job, or one queued again by a retry)."""
        keys = {"singleflight": self.keys.singleflight(fingerprint, user), "user_jobs": self.keys.user_jobs(user)}
        with redis_errors():
            reply = self._admit(keys, {"job_id": job_id, "now_ms": now_ms, "ttl_s": ttl_s,
                                       "max_inflight": max_inflight, "mode": "retry" if retry else "new"})
        outcome = reply[0].decode()
        if outcome == "existing":
            return Admission(outcome, existing=reply[1].decode(), existing_since_ms=int(reply[2]))
        if outcome == "quota":
            return Admission(outcome, inflight=int(reply[1]))
        return Admission(outcome, added=bool(reply[1]), sf_set=bool(reply[2]))

    def release(self, user: str, fingerprint: str, job_id: str, inflight: bool = True,
                singleflight: bool = True) -> None:
        """Take ``job_id`` out of the user's in-flight set and free its single-flight key
        (only while that key still names this job)."""
        keys = {"singleflight": self.keys.singleflight(fingerprint, user), "user_jobs": self.keys.user_jobs(user)}
        with redis_errors():
            self._release(keys, {"job_id": job_id, "inflight": int(inflight), "singleflight": int(singleflight)})

    def undo(self, user: str, fingerprint: str, job_id: str, admission: Admission) -> None:
        """Undo what :meth:`admit` reserved, when the job script then refused."""
        if admission.added or admission.sf_set:
            self.release(user, fingerprint, job_id, admission.added, admission.sf_set)
