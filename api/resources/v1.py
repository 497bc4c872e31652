"""``/api/v1/jobs``: the caller's jobs (list, detail) and the actions on one (cancel, retry)."""

from __future__ import annotations

import falcon

from tracebus.errors import InvalidParams

from api import streaming
from api.inputs import IntParam, paging, read_json, text_param, wants_fresh
from api.resources import accepted
from tracebus.jobs import export
from tracebus.jobs.fields import Choice, Custom, Flag, Shape
from tracebus.jobs.states import STATES
from tracebus.trace import installed
from tracebus.trace.now_or_job import decide

#: Values of the ``status`` filter: the public statuses plus the internal ``partial``.
STATUS_FILTERS = STATES
#: Longest ``domain`` accepted by the export.
MAX_DOMAIN_LENGTH = 64
#: Jobs per page of the list.
LIST_LIMIT = IntParam("limit", 1, 1000, 50, "jobs per page")


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
        status = req.get_param("status")
        if status is not None and status not in STATUS_FILTERS:
            raise InvalidParams(f"status must be one of {', '.join(STATUS_FILTERS)}, got {status[:40]!r}")
        offset, limit = paging(req, LIST_LIMIT)
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
        fmt = req.get_param("format") or "parquet"
        if fmt not in export.FORMATS:
            raise InvalidParams(f"format must be one of {', '.join(export.FORMATS)}, got {fmt[:40]!r}")
        domain = text_param(req, "domain", MAX_DOMAIN_LENGTH) or None
        body = self.service.export(job_id, domain, fmt, user=req.context.user)
        extension = {"parquet": "parquet", "arrow": "arrows", "csv": "csv"}[fmt]
        resp.set_header("Content-Disposition", f'attachment; filename="{job_id}-{domain or "result"}.{extension}"')
        streaming.stream(resp, body, export.CONTENT_TYPES[fmt], f"{fmt} export of {job_id}")
