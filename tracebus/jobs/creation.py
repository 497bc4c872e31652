"""Job creation: admission, the job's keys written, and the rollback of a job that never started.

A mixin of :class:`tracebus.jobs.store.JobStore` (which holds the Redis client, the settings,
the job scripts and the figures it uses). :meth:`JobCreation.create` first asks reuse
(:mod:`tracebus.jobs.reuse`) for a stored result of an identical request, then admits the job
in the user's slot (single-flight and quota, :mod:`tracebus.jobs.admission`), charges its
inputs to the user's budget, files it in the jobs index the sweeper reads and writes its keys
(``job_create.lua``), each step undone when a later one fails. An identical request meanwhile
joins the job in flight (its twin), waiting out a create still under way.
:meth:`JobCreation.abandon` rolls back a job whose first units could not be sent.
"""

from __future__ import annotations

import time

import msgpack

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.admission import Admission
from tracebus.jobs.budget import stored_bytes
from tracebus.jobs.errors import JobStateConflict, QuotaExceeded
from tracebus.jobs.ids import new_job_id
from tracebus.jobs.spec import JobSpec
from tracebus.jobs.states import ACTIVE_STATES, JobState, UnitState

#: Seconds a client over quota is told to wait.
QUOTA_RETRY_AFTER_S = 30
#: Seconds after its admission during which a job without a hash is taken to be being created
#: (a create writes the job's inputs: 114K CIDs take well under a second), and how often an
#: identical request looks for it meanwhile.
CREATE_GRACE_S = 5.0
CREATE_POLL_S = 0.02
_PENDING = msgpack.packb({"state": UnitState.PENDING.value, "attempt": 0, "rows": 0})


class JobCreation:
    """Admitting and creating jobs, and rolling one back (mixed into ``JobStore``)."""

    def create(self, spec: JobSpec) -> str:
        """Admit a job, or return the in-flight job of the same user with the same fingerprint,
        or (a spec with a ``result_key``, not ``fresh``) a new completed job answered from the
        stored result of an identical request (:meth:`~tracebus.jobs.reuse.JobReuse.reuse`).

        Args:
            spec(JobSpec): the job, as its kind describes it.

        Returns:
            str: the job id (``<kind>-<24 hex>``: 96 random bits, so that holding an id is
            what grants access to an anonymous caller's job); all its units are pending.

        Raises:
            QuotaExceeded: the user has ``user_max_inflight`` queued or running jobs.
        """
        s = self.settings
        reusable = bool(spec.result_key) and s.reuse_max_age_s > 0
        if reusable:
            reused = self._reused(spec)
            if reused is not None:
                return reused
        inputs = spec.packed_inputs()
        for _ in range(2):
            job_id = new_job_id(spec.kind)
            fingerprint = spec.fingerprint or job_id
            admission = self.admissions.admit(spec.user, fingerprint, job_id, self._now_ms(),
                                              s.job_ttl_s, s.user_max_inflight)
            if admission.outcome == "admitted":
                return self._create_admitted(spec, job_id, fingerprint, inputs, admission, reusable)
            if admission.outcome == "quota":
                raise QuotaExceeded(
                    f"user {spec.user} already has {admission.inflight} jobs in flight "
                    f"(limit {s.user_max_inflight})",
                    retry_after_s=QUOTA_RETRY_AFTER_S, inflight=admission.inflight)
            twin = self._twin_in_flight(spec, fingerprint, admission, reusable)
            if twin is not None:
                return twin
        raise JobStateConflict("single-flight key keeps pointing at a job that is not in flight")

    def _reused(self, spec: JobSpec) -> str | None:
        """The id of a new completed job answered from the stored result of a request identical
        to the reusable ``spec`` (:meth:`~tracebus.jobs.reuse.JobReuse.reuse`), or None: none is fresh enough, or
        ``spec`` asks for a ``fresh`` run (counted)."""
        if spec.fresh:
            self.count_reuse(spec.kind, "fresh")
            return None
        reused = self.reuse(spec.kind, spec.user, spec.result_key, spec.actor_name)
        return reused[0] if reused is not None else None

    def _create_admitted(self, spec: JobSpec, job_id: str, fingerprint: str, inputs: list[bytes],
                         admission: Admission, reusable: bool) -> str:
        """Create the job ``job_id`` just admitted (its ``admission`` undone when that fails):
        its budget charge, its place in the jobs index, its keys; ``job_id``."""
        s = self.settings
        now = self._now_ms()
        try:
            # What the job hash and its inputs store, against the user's budget
            self.budget.charge(spec.user, job_id, stored_bytes(spec, inputs), self.budget.expires_in(s.job_ttl_s))
            # Into the jobs index ({jobs} slot) before the job exists: the sweeper reads
            # the index, so a job whose submitter dies after this point is still found.
            self.figures.record(job_id, now, created=True)
            self._run_create(job_id, spec, fingerprint, inputs)
        except BaseException:
            self.admissions.undo(spec.user, fingerprint, job_id, admission)
            raise
        if reusable:
            self._mark_running(spec.result_key, job_id)
        miss = {f"reuse:miss:{spec.kind}": 1} if reusable and not spec.fresh else {}
        self.figures.record(job_id, now, new=JobState.QUEUED.value, jobs_submitted=1, **miss)
        self._prune_index()
        return job_id

    def _twin_in_flight(self, spec: JobSpec, fingerprint: str, admission: Admission,
                        reusable: bool) -> str | None:
        """The job the single-flight key of ``fingerprint`` names (``admission.existing``) when
        it is still in flight, to join; else None, the key dropped so the next try is admitted
        anew."""
        existing = admission.existing
        status = self._twin_status(existing, admission.existing_since_ms)
        if status in ACTIVE_STATES:
            if reusable:
                self.count_reuse(spec.kind, "join")
            return existing
        # The key outlived its job's flight: the job just ended (its own release is on its
        # way) or never was (a crash); drop the key and admit anew.
        self.admissions.release(spec.user, fingerprint, existing)
        return None

    def _twin_status(self, job_id: str, admitted_ms: int) -> str | None:
        """The status of the twin ``job_id`` the single-flight key names, or None when it has
        no hash: waited for while the submit that admitted it may still be creating it
        (:data:`CREATE_GRACE_S` from its admission), so an identical request sent at the same
        moment joins it instead of taking it for a crash's leftover and admitting a second job."""
        wait_s = min(CREATE_GRACE_S, max(0.0, (admitted_ms - self._now_ms()) / 1000 + CREATE_GRACE_S))
        deadline = time.monotonic() + wait_s
        while True:
            with redis_errors():
                status = self.redis.hget(self.keys.job(job_id), "status")
            if status is not None:
                return status.decode()
            if time.monotonic() >= deadline:
                return None
            time.sleep(CREATE_POLL_S)

    def _run_create(self, job_id: str, spec: JobSpec, fingerprint: str, inputs: list[bytes]):
        fields = spec.hash_fields(job_id, self._now_ms())
        fields["fingerprint"] = fingerprint
        pairs = [x for name, value in fields.items() for x in (name, value)]
        return self._run("create", job_id, acknowledged=True, now_ms=self._now_ms(),
                         units_total=spec.plan.total, pending=_PENDING, n_fields=len(fields),
                         fields_inputs=pairs + inputs)

    def abandon(self, job_id: str, taken: list[int]) -> bool:
        """Roll back a job whose first units could not be sent (see ``job_abandon.lua``).

        Three steps, one slot each: the job's own keys go (``job_abandon.lua``, which leaves
        a live job alone), then the user's quota slot and single-flight key (``user_release.lua``),
        then the figures (out of the index and status zsets, ``jobs_abandoned`` counted). The
        last two run only when the first removed the job.

        Args:
            taken: the units this submit moved to queued and failed to send ([] when even
                the take failed: a take that ran after all leaves the job live, to the sweeper).

        Returns:
            bool: True when the job and everything its admission took are gone; False when
            it is live (someone else sent or started a unit) or already gone.
        """
        result = self._run("abandon", job_id, taken=taken)
        if result[0] != b"abandoned":
            return False
        self._fixed.pop(job_id, None)
        user, fingerprint = result[1].decode(), result[2].decode()
        self.admissions.release(user, fingerprint or job_id, job_id)
        self.figures.forget(job_id, self._now_ms(), jobs_abandoned=1)
        return True

    def _prune_index(self, sample: int = 20) -> None:
        """Drop the oldest index members whose job expired.

        Only members filed more than a job TTL ago: a job's hash lives at least that long, and
        a younger member without one is a job being created (filed before ``job_create.lua``),
        which another submit's prune must not take out of the index the sweeper reads.
        """
        created_before = self._now_ms() - self.settings.job_ttl_s * 1000
        with redis_errors():
            oldest = self.redis.zrangebyscore(self.keys.jobs_index(), "-inf", f"({created_before}",
                                              start=0, num=sample)
            pipe = self.redis.pipeline(transaction=False)
            for job_id in oldest:
                pipe.exists(self.keys.job(job_id.decode()))
            gone = [j for j, alive in zip(oldest, pipe.execute()) if not alive]
            if gone:
                self.redis.zrem(self.keys.jobs_index(), *gone)
