"""Every job behind the dashboard's generic job contract (``/api/job/{id}[/result|/abandon]``).

:class:`GenericJobs` reads any job of the store, whatever its kind, as the original's
routes/job_routes.py answers it (the document is :func:`tracebus.jobs.contract.render`'s):
the trace kinds through their own views (an events or MSD job's progress words and result,
a stage job's query id and answer, a declared query kind's answer), any other kind through
the job layer's defaults.

The rules are those of the other routes: a ``prefix`` that is not the job's kind is "not
found" (as in the original, where the prefix names the key space), and so is another user's
job (:mod:`tracebus.trace.owners`). Unlike the original's, abandon really cancels: the job's
units stop, and the job reads ``failed`` with ``JOB_CANCELLED`` from then on.
"""

from __future__ import annotations

from typing import Iterator

from tracebus.jobs import contract
from tracebus.jobs.contract import KindView
from tracebus.jobs.errors import JobAlreadyTerminal, JobNotFound, JobStateConflict
from tracebus.jobs.store import JobStore
from tracebus.jobs.states import FINAL_STATES, JobState
from tracebus.trace import dashview, jobview, owners, query
from tracebus.trace.events import request as jobrequest
from tracebus.trace.stages import jobs as stage_jobs
from tracebus.trace.query.jobs import QueryView


class EventsView(KindView):
    """Trace-events jobs, MSD included: the trace poller's progress words and full result.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
    """

    def __init__(self, service):
        self.service = service

    def state(self, doc: dict) -> str:
        """An MSD job whose detection, detail or reduce failed has failed (:mod:`jobview`)."""
        return jobview.render_status(doc)["state"]

    def progress(self, doc: dict) -> str:
        return dashview.progress_text(self.state(doc), doc["progress"])

    def ids(self, doc: dict) -> tuple[str | None, str | None]:
        """The job id (the key of its result) and, for an MSD job, its ``trace_query_id``."""
        query_id, _ = super().ids(doc)
        msd = doc["app"].get("msd") or {}
        return query_id, (msd.get("trace_query_id") if query_id else None)

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        """What ``GET /api/trace/job/{id}/result`` answers without ``domain``."""
        return self.service.full_result(doc["job_id"], user=user)


class StageView(KindView):
    """Seed-resolve and lineage jobs: their query id and the stage's synchronous answer.

    Args:
        jobs: the :class:`~tracebus.trace.stages.jobs.StageJobs`.
        kind(str): ``trace-seed`` or ``trace-lin``.
    """

    def __init__(self, jobs, kind: str):
        self.jobs, self.kind = jobs, kind

    def progress(self, doc: dict) -> str:
        return stage_jobs.progress_text(self.kind, doc["status"])

    def ids(self, doc: dict) -> tuple[str | None, str | None]:
        return doc["app"].get("query_id"), None

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        return self.jobs.result(self.kind, doc["job_id"], user=user)


class GenericJobs:
    """Status, result and abandon of any job of the caller.

    Args:
        store(JobStore): the jobs.
        views(dict[str, KindView]): kind -> its view; a kind not named here gets the defaults.
    """

    def __init__(self, store: JobStore, views: dict[str, KindView]):
        self.store, self.views, self.default = store, dict(views), KindView()

    @classmethod
    def of_trace(cls, service, stages, more: dict[str, KindView] | None = None) -> "GenericJobs":
        """The trace kinds' views over ``service``'s store, plus ``more``."""
        views = {jobrequest.JOB_KIND: EventsView(service), stage_jobs.SEED_KIND: StageView(stages, stage_jobs.SEED_KIND),
                 stage_jobs.LINEAGE_KIND: StageView(stages, stage_jobs.LINEAGE_KIND),
                 **{name: QueryView() for name in query.declared()}, **(more or {})}
        return cls(service.store, views)

    def _detail(self, job_id: str, prefix: str | None, user: str | None) -> tuple[dict, KindView]:
        """The detail document and view of a job the caller may read under ``prefix``.

        Raises:
            JobNotFound: unknown or expired, another user's, or ``prefix`` is not its kind.
        """
        kind = contract.kind_of(job_id)
        if prefix and prefix != kind:
            raise JobNotFound(f"job {job_id!r} not found (prefix={prefix[:64]!r})")
        doc = self.store.detail(job_id)
        if not owners.may_access(doc["user"], user):
            raise JobNotFound(f"no job {job_id}")
        return doc, self.views.get(kind, self.default)

    def status(self, job_id: str, prefix: str | None = None, user: str | None = None) -> dict:
        """The contract's status document (:func:`tracebus.jobs.contract.render`)."""
        doc, view = self._detail(job_id, prefix, user)
        return contract.render(doc, view)

    def result(self, job_id: str, prefix: str | None = None, user: str | None = None) -> Iterator[bytes]:
        """The completed job's result document, as JSON fragments (its kind's; by default every
        section's rows, :func:`tracebus.jobs.contract.sections_document`).

        Raises:
            JobNotFound: as :meth:`status`. JobNotComplete: queued or running.
            JobStateConflict: failed or cancelled. JobResultExpired: the result expired.
        """
        doc, view = self._detail(job_id, prefix, user)
        contract.check_completed(doc, view.state(doc))
        return view.result(self.store, doc, user)

    def abandon(self, job_id: str, prefix: str | None = None, user: str | None = None) -> dict:
        """Cancel a queued or running job; ``{job_id, status: "abandoned", already_abandoned}``
        as the original answers (an already cancelled job: ``already_abandoned`` true).

        Raises:
            JobNotFound: as :meth:`status`. JobAlreadyTerminal: it completed or failed first.
        """
        doc, _ = self._detail(job_id, prefix, user)
        if doc["status"] not in FINAL_STATES:
            try:
                self.store.cancel(job_id)
                return {"job_id": job_id, "status": "abandoned", "already_abandoned": False}
            except JobStateConflict:  # it ended meanwhile
                doc = self.store.status(job_id)
        if doc["status"] == JobState.CANCELLED:
            return {"job_id": job_id, "status": "abandoned", "already_abandoned": True}
        raise JobAlreadyTerminal(f"job is already in terminal state: {contract.PUBLIC_STATUS[doc['status']]!r}",
                                 status=contract.PUBLIC_STATUS[doc["status"]])
