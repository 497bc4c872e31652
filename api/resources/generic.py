"""``/api/job/{job_id}[/result|/abandon]``: the dashboard's generic job contract, for every kind.

As the original's routes/job_routes.py, always in its envelope (``{success, data, meta}``;
errors ``{success: false, error, meta}``): useAsyncJobPolling.ts unwraps ``data`` and stops on
``status`` completed or failed. ``prefix`` (the job's kind) is optional here; one that is not
the job's kind is 404. Abandon takes ``{prefix}`` or ``{}`` (the pages send both, the portal's
``sendBeacon`` on unload too) and cancels the job for real. The logic is
:class:`tracebus.trace.generic_jobs.GenericJobs`.
"""

from __future__ import annotations

import falcon

from tracebus.jobs.fields import Text
from tracebus.jobs.shapes import Query, Shape

from api import streaming
from api.inputs import query, read_json

#: Longest ``prefix`` accepted (a job kind has at most 40 characters).
MAX_PREFIX_LENGTH = 64
#: Largest abandon body read (``{"prefix": "..."}``).
MAX_ABANDON_BODY = 4096
#: The abandon body, ``{}`` or ``{"prefix": "<job kind>"}`` (null or "": none); the OpenAPI
#: request schema is derived from it.
ABANDON_REQUEST = Shape((
    Text("prefix", nullable=True, nonempty=False, max_length=MAX_PREFIX_LENGTH,
         invalid="prefix must be a string of at most {max} characters"),
), not_object='request body must be a JSON object: {} or {"prefix": "<job kind>"}')
#: The query string of the status and the result: ``prefix``, the job's kind (optional).
PREFIX_QUERY = Query((
    Text("prefix", nullable=True, nonempty=False, max_length=MAX_PREFIX_LENGTH,
         invalid='The "{name}" parameter is invalid. The value must be at most {max} characters.',
         description="the job's kind (optional); another kind: 404 as in the original"),))


class GenericJob:
    """A job of the caller, of any kind.

    Args:
        jobs: the :class:`~tracebus.trace.generic_jobs.GenericJobs`.
    """

    enveloped = "always"

    def __init__(self, jobs):
        self.jobs = jobs

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.status(job_id, query(req, PREFIX_QUERY)["prefix"], user=req.context.user)

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = self.jobs.result(job_id, query(req, PREFIX_QUERY)["prefix"], user=req.context.user)
        streaming.stream(resp, body, falcon.MEDIA_JSON, f"result of {job_id}")

    def on_post_abandon(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.abandon(job_id, _prefix_of(req), user=req.context.user)


def _prefix_of(req: falcon.Request) -> str | None:
    """The body's ``prefix``: ``{}``, an empty body or a null prefix is none.

    Raises:
        InvalidParams: the body is not a JSON object, or ``prefix`` not a short string
            (:data:`ABANDON_REQUEST`).
    """
    if not req.content_length:
        return None
    return ABANDON_REQUEST.check(read_json(req, MAX_ABANDON_BODY))["prefix"]
