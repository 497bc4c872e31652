"""``POST /api/trace/seed-resolve`` and ``POST /api/trace/lineage``: the MSD page's first stages,
and ``/api/trace/{seed,lineage}/job/{job_id}[/result]``: their jobs.

Thin: the body is read (size-capped) and checked by :class:`~tracebus.trace.stages.answers.MsdStages`
(a bad one is a 400 before any query or job); a small request is answered now (200), a large
one (:class:`~tracebus.trace.stages.jobs.StageJobs` decides) is admitted as a job (202 with
``async: true``, ``job_id`` and ``status_url``, as the dashboard's useTraceProgress.ts reads it).
Errors become HTTP statuses in :mod:`api.errors`. The answers are in the original's envelope
like the other ``/api/trace/*`` routes (the query-tool page reads only ``payload.data``) unless
``TRACEBUS_API_DASHBOARD_ENVELOPE=0``.
"""

from __future__ import annotations

import falcon

from api import streaming
from api.inputs import read_json, wants_fresh
from api.resources import accepted


class _Stage:
    """A stage request: answered at once (200), or as a one-unit job above its threshold (202).

    Args:
        stages: the :class:`~tracebus.trace.stages.answers.MsdStages`.
        jobs: the :class:`~tracebus.trace.stages.jobs.StageJobs`.
        dispatcher: sends a new job's unit.
        max_body_bytes(int): the largest accepted body.
        offloop: the :class:`~api.offloop.OffLoop` that encodes the answer.
    """

    #: The dashboard's route: in the original's envelope unless TRACEBUS_API_DASHBOARD_ENVELOPE=0.
    enveloped = "dashboard"

    def __init__(self, stages, jobs, dispatcher, max_body_bytes: int, offloop):
        self.stages, self.jobs, self.dispatcher, self.max_body_bytes = stages, jobs, dispatcher, max_body_bytes
        self.offloop = offloop

    def operations(self) -> tuple:
        """(check, is_async, run, submit) of this stage."""
        raise NotImplementedError

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        check, is_async, run, submit = self.operations()
        request = check(read_json(req, self.max_body_bytes))
        if not is_async(request):
            self.offloop.answer(resp, run(request, req.context.user))
            return
        accepted(resp, submit(request, req.context.user, self.dispatcher, fresh=wants_fresh(req)))


class SeedResolve(_Stage):
    """The seed-resolve stage."""

    def operations(self) -> tuple:
        return self.stages.check_seed, self.jobs.seed_is_async, self.stages.run_seed, self.jobs.submit_seed


class Lineage(_Stage):
    """The lineage stage (its answer is kept under its ``query_id`` for the events stage)."""

    def operations(self) -> tuple:
        return (self.stages.check_lineage, self.jobs.lineage_is_async, self.stages.run_lineage,
                self.jobs.submit_lineage)


class StageJob:
    """A stage job of the caller: ``on_get`` the status the poller reads, ``on_get_result`` the
    stage's 200 body (streamed from the stored answer).

    Args:
        jobs: the :class:`~tracebus.trace.stages.jobs.StageJobs`.
        kind(str): the stage's job kind, as :data:`~tracebus.trace.stages.jobs.ROUTES` names it (a job
            of another kind is not found here).
    """

    #: The dashboard's route: in the original's envelope unless TRACEBUS_API_DASHBOARD_ENVELOPE=0.
    enveloped = "dashboard"

    def __init__(self, jobs, kind: str):
        self.jobs, self.kind = jobs, kind

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.status(self.kind, job_id, user=req.context.user)

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = self.jobs.result(self.kind, job_id, user=req.context.user)
        streaming.stream(resp, body, falcon.MEDIA_JSON, f"answer of {job_id}")
