"""Large seed-resolve and lineage requests as jobs: the 202 / poll / result contract.

A stage request too large for the API process (:meth:`StageJobs.seed_is_async`,
:meth:`StageJobs.lineage_is_async`) is admitted as a one-unit job of kind ``trace-seed`` or
``trace-lin`` on the trace queue (quota and single-flight as for events jobs); a worker runs the
stage (:mod:`tracebus.trace.stages.units`) and stores the answer, as JSON, in the job's artifact
:data:`ANSWER` (it expires with the job); a lineage is also left in the LineageCache under its
``lin-`` query id, where the events stage finds it. The API answers what the dashboard's client
reads (useTraceProgress.ts: ``async === true`` and ``status_url``; then it polls ``status_url``
with useAsyncJobPolling.ts until ``status`` is completed or failed and GETs
``status_url + "/result"``), with the original's URLs (routes/trace_routes.py:
``/api/trace/seed/job/<id>``, ``/api/trace/lineage/job/<id>``).

The answer is read back in slices (:meth:`~tracebus.jobs.outputs.JobOutputs.artifact_slices`),
so the API never holds a large lineage whole.
"""

from __future__ import annotations

import logging
from typing import Iterator

import redis

from tracebus.jobs.errors import JobNotComplete, JobNotFound, JobResultExpired, JobStateConflict
from tracebus.jobs.spec import JobSpec, fingerprint_of
from tracebus.jobs.store import JobStore
from tracebus.jobs.states import FINAL_STATES, JobState
from tracebus.trace import jobview, kinds, owners
from tracebus.trace.stages.answers import SERIAL, seed_ids, serial_patterns
from tracebus.trace.settings import TraceSettings
from tracebus.trace.states import STAGE_CODE, STAGE_STATUS, stage_failed, stage_progress
from tracebus.trace.stages.params import LineageRequest, SeedRequest

log = logging.getLogger(__name__)

#: Job kinds (and id prefixes) of the two stages.
SEED_KIND, LINEAGE_KIND = "trace-seed", "trace-lin"
#: The stage (and only section) of each kind, and the URL segment of its status route.
STAGES = {SEED_KIND: "seed-resolve", LINEAGE_KIND: "lineage"}
ROUTES = {SEED_KIND: "seed", LINEAGE_KIND: "lineage"}
#: The actor that runs a stage unit (:mod:`tracebus.trace.stages.units`).
ACTOR_NAME = "trace_stage_unit"
#: The registered job kind of the stage jobs (:mod:`.kind`).
STAGE_KIND = "stages"
#: The artifact holding the stage's answer (JSON bytes).
ANSWER = "answer"
#: Bytes per read of the answer (one GETRANGE).
SLICE_BYTES = 1 << 20
_RUNNING = {SEED_KIND: "resolving seeds", LINEAGE_KIND: "tracing lineage"}


def links(kind: str, job_id: str) -> dict[str, str]:
    """The status and result URLs of a stage job (the client reads ``status_url``)."""
    status_url = f"/api/trace/{ROUTES[kind]}/job/{job_id}"
    return {"status_url": status_url, "result_url": f"{status_url}/result"}


class StageJobs:
    """Admits and reads the stage jobs.

    Args:
        settings(TraceSettings): thresholds, queue, TTLs, quota.
        client(redis.Redis): the Redis of the jobs.
    """

    def __init__(self, settings: TraceSettings, client: redis.Redis):
        self.settings = settings
        self.store = JobStore(client, settings)

    # -- deciding ----------------------------------------------------------------------------------
    def seed_is_async(self, req: SeedRequest) -> bool:
        """Date mode over more than ``TRACE_SEED_ASYNC_DAYS`` days (the seeds grow with the
        window); container mode with more than ``TRACE_SEED_SYNC_MAX_VALUES`` values, or a
        serial_number resolve with more than ``TRACE_SEED_SYNC_MAX_PATTERNS`` wildcard values (each
        a full scan of the containers; by default any)."""
        if req.mode == "date_range":
            return req.days > self.settings.seed_async_days
        resolve_type, values = req.container
        return len(values) > self.settings.seed_sync_max_values or (
            resolve_type == SERIAL and len(serial_patterns(values)) > self.settings.seed_sync_max_patterns)

    def lineage_is_async(self, req: LineageRequest) -> bool:
        """More seeds than ``TRACE_ASYNC_CID_THRESHOLD`` (the API's memory grows with them)."""
        return len(req.seeds) > self.settings.async_cid_threshold

    # -- admitting --------------------------------------------------------------------------------
    def submit_seed(self, req: SeedRequest, user: str, dispatcher, fresh: bool = False) -> dict:
        """Admit a seed-resolve job; returns the 202 answer.

        Raises:
            QuotaExceeded: the user has too many jobs in flight.
        """
        cache_key, query_id = seed_ids(req.profile, req.params)
        spec = self._spec(SEED_KIND, user, [query_id], fingerprint_of(SEED_KIND, query_id, user),
                          {"profile": req.profile, "params": req.params, "query_id": query_id},
                          self._result_key(user, SEED_KIND, req.params), fresh)
        job_id = self._start(spec, dispatcher)
        return {"stage": "seed-resolve", "async": True, "job_id": job_id, "query_id": query_id,
                "cache_key": cache_key, **links(SEED_KIND, job_id)}

    def submit_lineage(self, req: LineageRequest, user: str, dispatcher, fresh: bool = False) -> dict:
        """Admit a lineage job (its seeds are the job's one input chunk); returns the 202 answer.

        Raises:
            QuotaExceeded: the user has too many jobs in flight.
        """
        spec = self._spec(LINEAGE_KIND, user, req.seeds, fingerprint_of(LINEAGE_KIND, req.profile, req.query_id, user),
                          {"profile": req.profile, "params": {"direction": req.direction},
                           "query_id": req.query_id},
                          self._result_key(user, LINEAGE_KIND, req.profile, req.direction, req.seeds), fresh)
        job_id = self._start(spec, dispatcher)
        return {"stage": "lineage", "async": True, "job_id": job_id, "query_id": req.query_id,
                "cid_count": len(req.seeds), **links(LINEAGE_KIND, job_id)}

    def _spec(self, kind: str, user: str, items: list, fingerprint: str, app: dict, result_key: str,
              fresh: bool) -> JobSpec:
        return JobSpec(kind=kind, user=user, sections=(STAGES[kind],), items=items, chunk_items=len(items),
                       queue=self.settings.queue, actor_name=ACTOR_NAME, fingerprint=fingerprint, app=app,
                       result_key=result_key, fresh=fresh)

    def _result_key(self, user: str, *request) -> str:
        """The stage kind's fingerprint of a request for reuse (:meth:`tracebus.trace.jobkind.JobKind.result_key`)."""
        return kinds.named(STAGE_KIND).result_key(self.settings, user, *request)

    def _start(self, spec: JobSpec, dispatcher) -> str:
        job_id = self.store.create(spec)
        log.info("job %s submitted: %s, %d items, user %s", job_id, spec.kind, len(spec.items), spec.user,
                 extra={"job_id": job_id, "user": spec.user})
        dispatcher.start(job_id)
        return job_id

    # -- reading ----------------------------------------------------------------------------------
    def _owned(self, kind: str, job_id: str, user: str | None) -> tuple[dict, dict]:
        """(the trace status document, the kind's app fields) of a job of ``kind`` the caller may read."""
        if not job_id.startswith(kind + "-"):
            raise JobNotFound(f"no {STAGES[kind]} job {job_id}")
        raw = self.store.status(job_id)
        doc = jobview.render_status(raw)
        if not owners.may_access(doc.get("user"), user):
            raise JobNotFound(f"no job {job_id}")
        return doc, raw.get("app", {})

    def status(self, kind: str, job_id: str, user: str | None = None) -> dict:
        """The status as the dashboard's poller reads it.

        ``status`` is queued / running / completed / failed (a cancelled job, or one whose
        unit failed, is failed with an ``error``: the poller stops only on completed or
        failed); ``progress`` is a string; ``query_id`` is the stage's (``seed-…`` / ``lin-…``).

        Raises:
            JobNotFound: unknown, expired, another user's, or a job of another kind.
        """
        doc, app = self._owned(kind, job_id, user)
        state = doc["state"]
        # A seed job has no CIDs as input (its one item is the query id): no cid_count.
        hidden = ("domains", "failed_domains") + (("cid_count",) if kind == SEED_KIND else ())
        view = {k: v for k, v in doc.items() if k not in hidden}
        # A stage job does not fetch events: its detail's stage says what ``progress`` says.
        detail = {**doc["progress"], "stage": _RUNNING[kind]} if state == JobState.RUNNING else doc["progress"]
        view.update(stage=STAGES[kind], progress=progress_text(kind, state), progress_detail=detail,
                    query_id=app.get("query_id"))
        if stage_failed(state):  # one unit: a failed unit is a failed stage
            view.update(status=STAGE_STATUS[state], error=doc.get("error") or f"{STAGES[kind]} job {state}")
        if state in STAGE_CODE:
            view["code"] = STAGE_CODE[state]
        return view

    def result(self, kind: str, job_id: str, user: str | None = None) -> Iterator[bytes]:
        """The stage's answer (the synchronous 200 body), as JSON slices.

        The first slice is read before returning, so an expired answer is an error, not a
        truncated body.

        Raises:
            JobNotFound: as :meth:`status`. JobNotComplete: the job is queued or running.
            JobStateConflict: the job failed or was cancelled. JobResultExpired: the answer expired.
        """
        doc, _ = self._owned(kind, job_id, user)
        if doc["state"] != JobState.COMPLETED:
            if doc["state"] in FINAL_STATES:
                raise JobStateConflict(f"{STAGES[kind]} job {job_id} is {doc['state']}: "
                                       f"{doc.get('error') or 'no answer'}", status=STAGE_STATUS[doc["state"]])
            raise JobNotComplete(f"{STAGES[kind]} job {job_id} has not completed yet", status=doc["status"])
        slices = self.store.artifact_slices(job_id, ANSWER, SLICE_BYTES)
        first = next(slices, None)
        if first is None:
            raise JobResultExpired(f"the answer of job {job_id} has expired")

        def rest() -> Iterator[bytes]:
            yield first
            yield from slices

        return rest()


def progress_text(kind: str, state: str) -> str:
    """A stage job's ``progress``: '' while queued, what it does while running, then its end."""
    return stage_progress(_RUNNING[kind], state)
