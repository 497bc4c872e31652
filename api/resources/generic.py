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

from tracebus.errors import InvalidParams

from api import streaming
from api.inputs import read_json, text_param

#: Longest ``prefix`` accepted (a job kind has at most 40 characters).
MAX_PREFIX_LENGTH = 64
#: Largest abandon body read (``{"prefix": "..."}``).
MAX_ABANDON_BODY = 4096


class GenericJob:
    """A job of the caller, of any kind.

    Args:
        jobs: the :class:`~tracebus.trace.generic_jobs.GenericJobs`.
    """

    enveloped = "always"

    def __init__(self, jobs):
        self.jobs = jobs

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.status(job_id, text_param(req, "prefix", MAX_PREFIX_LENGTH), user=req.context.user)

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = self.jobs.result(job_id, text_param(req, "prefix", MAX_PREFIX_LENGTH), user=req.context.user)
        streaming.stream(resp, body, falcon.MEDIA_JSON, f"result of {job_id}")

    def on_post_abandon(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.jobs.abandon(job_id, _prefix_of(req), user=req.context.user)


def _prefix_of(req: falcon.Request) -> str | None:
    """The body's ``prefix``: ``{}``, an empty body or a null prefix is none.

    Raises:
        InvalidParams: the body is not a JSON object, or ``prefix`` not a short string.
    """
    if not req.content_length:
        return None
    body = read_json(req, MAX_ABANDON_BODY)
    if not isinstance(body, dict):
        raise InvalidParams("request body must be a JSON object: {} or {\"prefix\": \"<job kind>\"}")
    prefix = body.get("prefix")
    if prefix is not None and (not isinstance(prefix, str) or len(prefix) > MAX_PREFIX_LENGTH):
        raise InvalidParams(f"prefix must be a string of at most {MAX_PREFIX_LENGTH} characters")
    return prefix or None
