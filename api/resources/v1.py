"""``/api/v1/jobs``: the caller's jobs (list, detail) and the actions on one (cancel, retry)."""

from __future__ import annotations

from dataclasses import replace

import falcon

from api import streaming
from api.inputs import OFFSET, query, read_json, wants_fresh
from api.resources import accepted
from api.resources.jobs import DOMAIN
from tracebus.jobs import export
from tracebus.jobs.fields import Choice, Custom, Flag, Int
from tracebus.jobs.shapes import Query, Shape
from tracebus.jobs.states import STATES
from tracebus.trace import installed
from tracebus.trace.now_or_job import decide

_NOT_ONE_OF = "{name} must be one of {choices}, got {value!r}"
#: ``GET /api/v1/jobs``: a status filter (the public statuses plus the internal ``partial``) and a page.
LIST_QUERY = Query((Choice("status", choices=STATES, invalid=_NOT_ONE_OF, echo=40, description="filter"),
                    OFFSET, Int("limit", minimum=1, maximum=1000, default=50, description="jobs per page")))
#: ``GET /api/v1/jobs/{id}/export``.
EXPORT_QUERY = Query((
    replace(DOMAIN, description="a domain (section) of the job; may be left out when it has one"),
    Choice("format", choices=export.FORMATS, default="parquet", invalid=_NOT_ONE_OF, echo=40)))


def submit_request() -> Shape:
    """``POST /api/v1/jobs``: ``{kind, params}``, a kind of those the registered kinds submit
    (:func:`tracebus.trace.installed.submittable`: the declared query kinds); the OpenAPI request
    schema is derived from it. ``params`` are the kind's to check."""
    return Shape((
        Choice("kind", required=True, choices=tuple(installed.submittable()), invalid="kind must be one of {choices}"),
        Custom("params", required=True, json={"type": "object"},
               description="the parameters of the kind, checked by it"),
        Flag("fresh", description="run the query again even when an identical request's result is stored "
                                  "(as Cache-Control: no-cache)"),
    ), not_object='request body must be a JSON object {"kind", "params"}')


class Jobs:
    """Job management of the caller's jobs, and jobs of the declared query kinds.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
        requests: ``requests(kind)``: the :class:`~tracebus.trace.now_or_job.NowOrJob` of a kind
            ``POST`` submits (:func:`tracebus.trace.installed.requests`).
        max_body_bytes(int): the largest accepted body.
    """

    def __init__(self, service, requests=None, max_body_bytes: int = 1 << 20):
        self.service, self.requests, self.max_body_bytes = service, requests, max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """``{kind, params}``: a job of a declared query kind (202, whatever its span)."""
        body = read_json(req, self.max_body_bytes)
        checked = submit_request().check(body)
        answer = decide(self.requests(checked["kind"]), body.get("params"), req.context.user,
                        fresh=bool(checked.get("fresh")) or wants_fresh(req), always_job=True)
        accepted(resp, answer.body)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = query(req, LIST_QUERY)
        status, offset, limit = q["status"], q["offset"], q["limit"]
        listing = self.service.list_jobs(req.context.user, status, offset, limit)
        next_offset = offset + limit if offset + limit < listing["total"] else None
        resp.media = {**listing, "next_offset": next_offset}

    def on_get_item(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.service.detail(job_id, user=req.context.user)

    def on_post_cancel(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.service.cancel(job_id, user=req.context.user)

    def on_post_retry(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.status = falcon.HTTP_202
        resp.media = self.service.retry(job_id, user=req.context.user)

    def on_get_export(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        """One domain as Parquet, Arrow (IPC stream) or CSV, streamed chunk by chunk."""
        q = query(req, EXPORT_QUERY)
        fmt, domain = q["format"], q["domain"]
        body = self.service.export(job_id, domain, fmt, user=req.context.user)
        extension = {"parquet": "parquet", "arrow": "arrows", "csv": "csv"}[fmt]
        resp.set_header("Content-Disposition", f'attachment; filename="{job_id}-{domain or "result"}.{extension}"')
        streaming.stream(resp, body, export.CONTENT_TYPES[fmt], f"{fmt} export of {job_id}")
