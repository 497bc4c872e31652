"""``POST /api/trace/seed-resolve`` and ``POST /api/trace/lineage``: the MSD page's first stages,
and ``/api/trace/{seed,lineage}/job/{job_id}[/result]``: their jobs.

Thin: the body is read (size-capped) and checked by :class:`~tracebus.trace.msd_stages.MsdStages`
(a bad one is a 400 before any query or job); a small request is answered now (200), a large
one (:class:`~tracebus.trace.stage_jobs.StageJobs` decides) is admitted as a job (202 with
``async: true``, ``job_id`` and ``status_url``, as the dashboard's useTraceProgress.ts reads it).
Errors become HTTP statuses in :mod:`api.errors`. The answers follow ``TRACEBUS_API_ENVELOPE``
like the other ``/api/trace/*`` routes (the page reads both forms).
"""

from __future__ import annotations

import falcon

from api import streaming
from api.inputs import read_json
from tracebus.trace.stage_jobs import LINEAGE_KIND, SEED_KIND


class SeedResolve:
    """The seed-resolve stage.

    Args:
        stages: the :class:`~tracebus.trace.msd_stages.MsdStages`.
        jobs: the :class:`~tracebus.trace.stage_jobs.StageJobs`.
        dispatcher: sends a new job's unit.
        max_body_bytes(int): the largest accepted body.
    """

    def __init__(self, stages, jobs, dispatcher, max_body_bytes: int):
        self.stages, self.jobs, self.dispatcher, self.max_body_bytes = stages, jobs, dispatcher, max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        seed = self.stages.check_seed(read_json(req, self.max_body_bytes))
        if not self.jobs.seed_is_async(seed):
            resp.media = self.stages.run_seed(seed)
            return
        _accepted(resp, self.jobs.submit_seed(seed, req.context.user, self.dispatcher))


class Lineage:
    """The lineage stage (its answer is kept under its ``query_id`` for the events stage).

    Args:
        stages: the :class:`~tracebus.trace.msd_stages.MsdStages`.
        jobs: the :class:`~tracebus.trace.stage_jobs.StageJobs`.
        dispatcher: sends a new job's unit.
        max_body_bytes(int): the largest accepted body.
    """

    def __init__(self, stages, jobs, dispatcher, max_body_bytes: int):
        self.stages, self.jobs, self.dispatcher, self.max_body_bytes = stages, jobs, dispatcher, max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        lineage = self.stages.check_lineage(read_json(req, self.max_body_bytes))
        if not self.jobs.lineage_is_async(lineage):
            resp.media = self.stages.run_lineage(lineage)
            return
        _accepted(resp, self.jobs.submit_lineage(lineage, req.context.user, self.dispatcher))


def _accepted(resp: falcon.Response, answer: dict) -> None:
    resp.status = falcon.HTTP_202
    resp.location = answer["status_url"]
    resp.media = answer


class StageJob:
    """A stage job of the caller: ``on_get`` the status the poller reads, ``on_get_result`` the
    stage's 200 body (streamed from the stored answer).

    Args:
        jobs: the :class:`~tracebus.trace.stage_jobs.StageJobs`.
        kind(str): ``trace-seed`` or ``trace-lin`` (a job of another kind is not found here).
    """

    def __init__(self, jobs, kind: str):
        assert kind in (SEED_KIND, LINEAGE_KIND)
        self.jobs, self.kind = jobs, kind

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.status(self.kind, job_id, user=req.context.user)

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = self.jobs.result(self.kind, job_id, user=req.context.user)
        streaming.stream(resp, body, falcon.MEDIA_JSON, f"answer of {job_id}")
