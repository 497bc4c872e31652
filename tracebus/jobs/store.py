"""Job state in Redis: admission, unit lifecycle, cancel/retry, status and TTLs.

Pure Redis state, no queue: :class:`tracebus.jobs.dispatch.Dispatcher` sends what
:meth:`JobStore.take_next_units` returns; units (:mod:`tracebus.jobs.runner`) call
:meth:`JobStore.begin_unit` for an attempt token, write chunks with
:class:`tracebus.jobs.results.ChunkWriter` and their partial aggregate, then
:meth:`JobStore.finish_unit` or :meth:`JobStore.fail_unit`. Every state change is one Lua
script (``tracebus/jobs/lua/job_*.lua``, called by the KEYS/ARGV names its header declares),
appends a progress event, and refreshes the TTL of the job's keys; when a job reaches a
final state (or is retried) every key of it, result chunks included, gets a fresh full TTL
with the job hash last, so the status never expires before the results it describes.

Each script runs in the job's own Redis Cluster slot (its tag ``{<id>}``) and touches
nothing else. What spans slots is a step of its own, right before or after: admission
(single-flight and quota, :mod:`tracebus.jobs.admission`, the user's slot) and the
figures ``GET /metrics`` reads (:mod:`tracebus.jobs.figures`, the ``{jobs}`` slot):
units and rows, the job-duration histogram, the per-status zsets, the jobs index.

The store is mixins over one Redis client: a job's admission and creation
(:mod:`tracebus.jobs.creation`), its reads (:mod:`tracebus.jobs.reads`), its outputs
(:mod:`tracebus.jobs.outputs`) and results reused across requests (:mod:`tracebus.jobs.reuse`);
the unit lifecycle, cancel, retry and TTLs are here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import redis

from tracebus.engine.errors import BrokerConnectionError
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.admission import Admissions
from tracebus.jobs.budget import Budget
from tracebus.jobs.creation import QUOTA_RETRY_AFTER_S, JobCreation
from tracebus.jobs.errors import JobNotFound, JobStateConflict, QuotaExceeded, StaleAttempt
from tracebus.jobs.figures import JOB_DURATION_BUCKETS_S, JobFigures
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.outputs import JobOutputs
from tracebus.jobs.reads import JobReads
from tracebus.jobs.results import chunk_keys, manifest_counts
from tracebus.jobs.reuse import JobReuse
from tracebus.jobs.scripts import script
from tracebus.jobs.settings import JobSettings
from tracebus.jobs.share import Shares
from tracebus.jobs.states import ACTIVE_STATES, JobState, UnitState
from tracebus.jobs.units import UnitPlan

__all__ = ["JOB_DURATION_BUCKETS_S", "JobStore", "Settled"]

#: Approximate cap of each job's progress stream.
PROGRESS_MAXLEN = 1000


@dataclass(frozen=True, slots=True)
class Settled:
    """Outcome of :meth:`JobStore.finish_unit` / :meth:`JobStore.fail_unit`.

    Attributes:
        finished(bool): this was the last unit; the job reached a final state.
        state(str): the job's internal state afterwards.
    """

    finished: bool
    state: str


class JobStore(JobCreation, JobReads, JobOutputs, JobReuse):
    """Job state of every job kind (creation is in :class:`JobCreation`, reads in
    :class:`JobReads`, results reused across requests in :class:`JobReuse`).

    Args:
        redis(redis.Redis): client (the broker's: jobs and queues live in one Redis).
        settings(JobSettings): key prefix, TTL, quota, per-job in-flight cap.
        clock(Callable[[], float]): epoch seconds (injected for tests).
    """

    def __init__(self, redis: redis.Redis, settings: JobSettings,
                 clock: Callable[[], float] = time.time):
        self.redis, self.settings, self.clock = redis, settings, clock
        self.keys = JobKeys(settings.key_prefix)
        self._scripts = {name: script(redis, f"job_{name}")
                         for name in ("create", "take", "begin", "settle", "cancel", "retry", "abandon", "resume")}
        # A job's keys by the names the job scripts' headers give them (``manifest``, per section: _run).
        k = self.keys
        self._job_keys = {"job": k.job, "units": k.job_units, "todo": k.job_todo, "inputs": k.job_inputs,
                          "progress": k.job_progress, "partials": k.job_partials}
        self._fixed: dict[str, tuple] = {}
        self._join_end = script(redis, "job_join_end")
        self.admissions = Admissions(redis, self.keys)
        self.budget = Budget(redis, self.keys, settings.user_max_bytes)
        self.figures = JobFigures(redis, self.keys, settings.job_ttl_s)

    # -- the job scripts ----------------------------------------------------------------------
    def _run(self, name: str, job_id: str, /, *, section: str | None = None, acknowledged: bool = False,
             **args):
        """Run the job script ``job_<name>.lua`` on ``job_id``'s keys.

        Its KEYS are the job's keys its header names (``manifest``: that of ``section``;
        ``manifests``: every section's, in the plan's order); of its ARGV, ``job_id``,
        ``ttl_s`` and ``progress_maxlen`` are filled in here when it declares them, the rest
        come from ``args``. ``acknowledged``: a write that must survive a failover
        (``TRACEBUS_REDIS_WAIT_REPLICAS``).
        """
        run = self._scripts[name]

        def key_of(key: str):
            if key == "manifest":
                return self.keys.job_manifest(job_id, section)
            if key == "manifests":
                return [self.keys.job_manifest(job_id, s) for s in self._fixed_fields(job_id)[2].sections]
            return self._job_keys[key](job_id)

        keys = {key: key_of(key) for key in run.signature.key_names()}
        common = {"job_id": job_id, "ttl_s": self.settings.job_ttl_s, "progress_maxlen": PROGRESS_MAXLEN}
        declared = run.signature.arg_names()
        args.update({n: v for n, v in common.items() if n in declared and n not in args})
        wait = (self.settings.redis_wait_replicas, self.settings.redis_wait_timeout_ms) if acknowledged else (0, 0)
        with redis_errors():
            return run(keys, args, wait=wait)

    # -- unit lifecycle ----------------------------------------------------------------------
    def take_next_units(self, job_id: str, n: int, by_unit: int | None = None) -> list[int]:
        """Move up to ``n`` units from todo to queued, within ``job_max_inflight_units``.

        Args:
            by_unit: the settled unit whose slot is being refilled. The answer is
                remembered on it, so a repeat call (the worker died before sending and
                the message was redelivered) returns the same units instead of new ones,
                less those that have started since (they were sent after all).

        Returns:
            list[int]: the units the caller must now send ([] when cancelled or finished).
        """
        taken = self._run("take", job_id, n=n, per_job_cap=self.settings.job_max_inflight_units,
                          by_unit=-1 if by_unit is None else by_unit)
        return [int(u) for u in taken]

    def begin_unit(self, job_id: str, unit: int) -> int | None:
        """Start an attempt of ``unit``.

        A unit whose result was committed by an earlier attempt that died before
        :meth:`finish_unit` is finished here from its manifest entry, and skipped.

        Returns:
            int | None: the attempt token, or None when the worker must skip the unit
            (job cancelled or finished, unit already settled).
        """
        now = self._now_ms()
        try:
            section = self._fixed_fields(job_id)[2].section_of(unit)
        except (JobNotFound, IndexError):
            return None  # the job is gone (expired) or has no such unit, as job_begin.lua would say
        begun = self._run("begin", job_id, section=section, unit=unit, now_ms=now)
        if not begun:
            return None
        attempt, before = int(begun[0]), begun[1].decode()
        if before != JobState.RUNNING:
            self.figures.record(job_id, now, old=before, new=JobState.RUNNING.value)
        committed = begun[2] if len(begun) > 2 else None  # the manifest entry, read in the same step
        if committed is not None:
            self.finish_unit(job_id, unit, attempt, sum(manifest_counts(committed)[1]))
            return None
        if len(begun) > 3 and begun[3] is not None:
            self._begun_input = (job_id, unit, begun[3])  # load_input's next answer, read in the same step
        return attempt

    def finish_unit(self, job_id: str, unit: int, attempt: int, rows: int) -> Settled:
        """Mark ``unit`` done with ``rows`` rows (after ``ChunkWriter.commit``).

        Raises:
            StaleAttempt: ``attempt`` is not the unit's current running attempt.
        """
        return self._settle(job_id, unit, attempt, UnitState.DONE.value, rows, "")

    def fail_unit(self, job_id: str, unit: int, attempt: int, error: str) -> Settled:
        """Mark ``unit`` failed (retries exhausted); its section becomes failed.

        Raises:
            StaleAttempt: ``attempt`` is not the unit's current running attempt.
        """
        return self._settle(job_id, unit, attempt, UnitState.FAILED.value, 0, error[:2000])

    def summary_tick(self, job_id: str, every_s: int) -> bool:
        """True for the first caller in each ``every_s`` seconds of the job (SET NX EX: the
        workers of every host share it, and the key expires)."""
        with redis_errors():
            return bool(self.redis.set(self.keys.job_summary_tick(job_id), 1, nx=True, ex=every_s))

    def _settle(self, job_id: str, unit: int, attempt: int, outcome: str, rows: int, error: str) -> Settled:
        user, fingerprint, plan, _ = self._fixed_fields(job_id)
        now = self._now_ms()
        result = self._run("settle", job_id, section=plan.section_of(unit), acknowledged=True, unit=unit,
                           attempt=attempt, outcome=outcome, rows=rows, error=error, now_ms=now)
        if result[0] == -1:
            # Redis moved between the commit and now: the unit is run again (a new attempt).
            raise BrokerConnectionError(f"{job_id} unit {unit}: attempt {attempt}'s commit is not on this "
                                        "Redis primary (lost in a failover)")
        if not result[0]:
            raise StaleAttempt(f"{job_id} unit {unit}: attempt {attempt} fenced off")
        settled = Settled(bool(result[1]), result[2].decode())
        counts = {"units_done": 1, "rows": int(result[4])} if outcome == UnitState.DONE else {"units_failed": 1}
        self.figures.record(job_id, now, old=result[3].decode(), new=settled.state,
                            duration_ms=int(result[5]) if settled.finished else None, **counts)
        if settled.finished:
            self.admissions.release(user, fingerprint, job_id)
            self._extend_ttl(job_id, plan)
            if settled.state == JobState.COMPLETED:
                self._file_result(job_id)
            self._end_joined(job_id)
        return settled

    # -- cancel / retry ----------------------------------------------------------------------
    def cancel(self, job_id: str) -> int:
        """Cancel a queued or running job; running units stop at their next chunk write.

        Returns:
            int: units cancelled.

        Raises:
            JobNotFound: unknown job.
            JobStateConflict: the job already finished.
        """
        result = self._run_final_change("cancel", job_id, final_status=JobState.CANCELLED.value, error="")
        return int(result[1])

    def overdue(self, job_id: str) -> bool:
        """True when the job has run past ``TRACE_JOB_TIMEOUT_SECONDS`` since it was
        submitted (or last retried) and is still queued or running."""
        with redis_errors():
            status, created, retried = self.redis.hmget(self.keys.job(job_id), "status", "created_ms",
                                                         "retried_ms")
        if status is None or status.decode() not in ACTIVE_STATES or created is None:
            return False
        started_ms = int(retried or created)
        return self._now_ms() - started_ms > self.settings.job_timeout_s * 1000

    def stop_reason(self, job_id: str) -> str | None:
        """Why a statement that a unit of ``job_id`` runs now should stop, or None: the job
        ended (cancelled or failed) or expired, or it ran past ``TRACE_JOB_TIMEOUT_SECONDS``
        (then it is failed here, as the sweeper would fail it later)."""
        with redis_errors():
            status, created, retried = self.redis.hmget(self.keys.job(job_id), "status", "created_ms",
                                                         "retried_ms")
        if status is None:
            return "the job expired"
        status = status.decode()
        if status not in ACTIVE_STATES:
            return f"the job was {status}"
        started_ms = int(retried or created or 0)
        if started_ms and self._now_ms() - started_ms > self.settings.job_timeout_s * 1000:
            self.time_out(job_id)
            return f"the job ran past TRACE_JOB_TIMEOUT_SECONDS ({self.settings.job_timeout_s} s)"
        return None

    def time_out(self, job_id: str) -> bool:
        """Fail a job that ran past its time limit: its unsettled units are cancelled (a
        retry re-runs them), finished units keep their results.

        Returns:
            bool: True when this call ended the job (False: it had already finished).
        """
        return self.fail(job_id, f"job ran past TRACE_JOB_TIMEOUT_SECONDS ({self.settings.job_timeout_s} s)")

    def fail(self, job_id: str, reason: str) -> bool:
        """End a queued or running job as ``failed`` with ``reason`` (timed out, stranded,
        Redis full): unsettled units are cancelled (a retry re-runs them), finished units
        keep their results. Works when Redis is full.

        Returns:
            bool: True when this call ended the job (False: it had already finished or expired).
        """
        try:
            self._run_final_change("cancel", job_id, final_status=JobState.FAILED.value, error=reason[:2000])
        except (JobStateConflict, JobNotFound):
            return False
        return True

    def resume(self, job_id: str, units: list[int], max_resumes: int) -> tuple[str, list[int] | str]:
        """Put back to queued the ``units`` the sweeper found with no message (``job_resume.lua``).

        Returns:
            ("resumed", units to send) | ("fail", reason) | ("skip", status).
        """
        result = self._run("resume", job_id, now_ms=self._now_ms(), max_resumes=max_resumes, units=units)
        kind = result[0].decode()
        if kind == "resumed":
            return kind, [int(u) for u in result[2:]]
        return kind, result[1].decode()

    def retry(self, job_id: str) -> list[int]:
        """Re-run the failed and cancelled units of a partial, failed or cancelled job.

        Returns:
            list[int]: units now queued that the caller must send (up to the per-job cap and
            the user's share, :mod:`tracebus.jobs.share`; the rest follow as units settle).

        Raises:
            JobNotFound: unknown job.
            JobStateConflict: the job is queued, running or completed.
            QuotaExceeded: the user has ``user_max_inflight`` jobs in flight.
        """
        s = self.settings
        user, fingerprint, plan, _ = self._fixed_fields(job_id)
        if self.data_id(job_id) != job_id:
            raise JobStateConflict(f"job {job_id} was answered from an identical request's result and has "
                                   "nothing of its own to run again; send the request again")
        # The quota first, in the user's slot; undone when the job script refuses.
        admission = self.admissions.admit(user, fingerprint, job_id, self._now_ms(), s.job_ttl_s,
                                          s.user_max_inflight, retry=True)
        if admission.outcome == "quota":
            raise QuotaExceeded(f"user already has {admission.inflight} jobs in flight "
                                f"(limit {s.user_max_inflight})",
                                retry_after_s=QUOTA_RETRY_AFTER_S, inflight=admission.inflight)
        try:
            result = self._run_final_change("retry", job_id, per_job_cap=Shares(self).room(job_id))
        except BaseException:
            self.admissions.undo(user, fingerprint, job_id, admission)
            raise
        # The re-run has a time limit of its own: what the done units left (chunks, manifests,
        # partials, artifacts) gets a fresh TTL, as a new job's keys, not to expire under it.
        self._extend_ttl(job_id, plan)
        return [int(u) for u in result[2:]]

    def _run_final_change(self, name: str, job_id: str, **args) -> list:
        user, fingerprint, plan, _ = self._fixed_fields(job_id)
        now = self._now_ms()
        result = self._run(name, job_id, now_ms=now, **args)
        if result[0] == b"missing":
            raise JobNotFound(f"no job {job_id}")
        if result[0] == b"conflict":
            raise JobStateConflict(f"job {job_id} is {result[1].decode()}; cannot {name} it")
        if name == "cancel":
            final = args["final_status"]
            self.figures.record(job_id, now, old=result[2].decode(), new=final, duration_ms=int(result[3]))
            self.admissions.release(user, fingerprint, job_id)
            self._extend_ttl(job_id, plan)
            self._end_joined(job_id)
        else:
            self.figures.record(job_id, now, old=result[1].decode(), new=JobState.QUEUED.value)
        return result

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _extend_ttl(self, job_id: str, plan: UnitPlan) -> None:
        """Give every key of a finished (or retried) job a fresh full TTL, the job hash last."""
        k, ttl = self.keys, self.settings.job_ttl_s
        with redis_errors():
            pipe = self.redis.pipeline(transaction=False)
            for section in plan.sections:
                pipe.hgetall(k.job_manifest(job_id, section))
            manifests = pipe.execute()
            for chunk, copy in chunk_keys(k, job_id, plan.sections, manifests):
                pipe.expire(chunk, ttl)
                pipe.expire(copy, ttl)
            # The chunks live on other slots (other nodes of a cluster, which a pipeline serves
            # in no set order): expire them first, then the job's own keys in order.
            pipe.execute()
            for section in plan.sections:
                pipe.expire(k.job_manifest(job_id, section), ttl)
            extra = self.artifact_keys(self._job_hash(job_id), job_id)
            for key in (k.job_units(job_id), k.job_todo(job_id), k.job_inputs(job_id),
                        k.job_partials(job_id), *extra, k.job_progress(job_id), k.job(job_id)):
                pipe.expire(key, ttl)
            pipe.execute()
