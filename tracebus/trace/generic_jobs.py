"""Every job behind the dashboard's generic job contract (``/api/job/{id}[/result|/abandon]``).

:class:`GenericJobs` reads any job of the store, whatever its kind, as the original's
routes/job_routes.py answers it (the document is :func:`tracebus.jobs.contract.render`'s):
each trace job through its kind's view (:meth:`tracebus.trace.jobkind.JobKind.contract_view`:
an events or MSD job's progress words and result, a stage job's query id and answer, a declared
query kind's answer), a job of another application through the view given for its id's
prefix, else the job layer's defaults.

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
from tracebus.trace import installed, kinds, owners

__all__ = ["GenericJobs", "installed"]


class GenericJobs:
    """Status, result and abandon of any job of the caller.

    Args:
        store(JobStore): the jobs.
        views(dict[str, KindView]): id prefix -> the view of a job of another application (one
            whose actor no trace kind registered); a prefix not named here gets the defaults.
        service: the :class:`~tracebus.trace.service.TraceService` the trace kinds' views read
            through (None: every job gets the views of ``views`` or the defaults).
    """

    def __init__(self, store: JobStore, views: dict[str, KindView], service=None):
        self.store, self.views, self.default, self.service = store, dict(views), KindView(), service
        self._kind_views: dict[str, KindView] = {}

    @classmethod
    def of_trace(cls, service, more: dict[str, KindView] | None = None) -> "GenericJobs":
        """Every trace kind's view over ``service``, plus ``more`` for other applications' jobs."""
        return cls(service.store, dict(more or {}), service)

    def _view(self, doc: dict, prefix_kind: str) -> KindView:
        kind = kinds.find(doc) if self.service is not None else None
        if kind is None:
            return self.views.get(prefix_kind, self.default)
        view = self._kind_views.get(kind.name)
        if view is None:
            view = self._kind_views[kind.name] = kind.contract_view(self.service)
        return view

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
        return doc, self._view(doc, kind)

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
