"""The resources of the routes the kinds declare (:class:`tracebus.trace.routes.Route`), one per
way of serving (:data:`tracebus.trace.routes.SERVES`), and of ``POST /api/trace/events``.

Each is thin: it reads the request (a size-capped JSON body, a job id, the query string) and hands
it to the kind's plain-Python handler, then writes what comes back: a request answered now or
admitted as a job (:func:`tracebus.trace.now_or_job.decide`: 200, or 202 with the job), a job's
status or streamed answer, a lookup answered now, a file streamed. Errors become HTTP statuses in
:mod:`api.errors`; the envelope is the route's (``enveloped``).
"""

from __future__ import annotations

import falcon

from tracebus.trace.now_or_job import Answer, NowOrJob, decide
from tracebus.trace.routes import Download, Reply, Route

from api import streaming
from api.inputs import query_values, read_json, wants_fresh
from api.resources import accepted

#: Chunks of a streamed answer made now pulled before answering: the opening, the first part's
#: opening and its first batch, so a source that cannot be queried is still a 503.
SYNC_PRIMED_CHUNKS = 3


def answered(resp: falcon.Response, answer: Answer, offloop, what: str) -> None:
    """Write ``answer``: 202 with the job; else 200 with the document (encoded off the event
    loop) or the streamed JSON (each chunk made off the loop)."""
    if answer.job:
        accepted(resp, answer.body)
    elif answer.streamed:
        body = streaming.primed(offloop.iterate(answer.body), SYNC_PRIMED_CHUNKS)
        streaming.stream(resp, body, falcon.MEDIA_JSON, what)
    else:
        offloop.answer(resp, answer.body)


class NowOrJobRequest:
    """A ``POST`` answered now (200) or as a job (202).

    Args:
        op(NowOrJob): the kind's operation.
        max_body_bytes(int): the largest accepted body.
        offloop: the :class:`~api.offloop.OffLoop` that makes and encodes the answer made now.
        enveloped(str): the route's envelope (``dashboard`` or ``always``).
    """

    def __init__(self, op: NowOrJob, max_body_bytes: int, offloop, enveloped: str = "dashboard"):
        self.op, self.max_body_bytes, self.offloop, self.enveloped = op, max_body_bytes, offloop, enveloped

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer = decide(self.op, read_json(req, self.max_body_bytes), req.context.user, fresh=wants_fresh(req))
        answered(resp, answer, self.offloop, self.op.what)


class JobStatus:
    """``GET`` a job's status: ``handler(job_id, user)``'s document."""

    def __init__(self, handler, enveloped: str):
        self.handler, self.enveloped = handler, enveloped

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.handler(job_id, req.context.user)


class JobResult:
    """``GET`` a job's answer: ``handler(job_id, user)``'s JSON, streamed."""

    def __init__(self, handler, enveloped: str):
        self.handler, self.enveloped = handler, enveloped

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = self.handler(job_id, req.context.user)
        streaming.stream(resp, body, falcon.MEDIA_JSON, f"answer of {job_id}")


class Lookup:
    """``GET`` answered now from the query string: ``handler(values, user)``'s document (a
    :class:`~tracebus.trace.routes.Reply`: with meta fields of the envelope)."""

    def __init__(self, handler, enveloped: str):
        self.handler, self.enveloped = handler, enveloped

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        reply = self.handler(query_values(req), req.context.user)
        if isinstance(reply, Reply):
            resp.media = reply.body
            if reply.meta is not None:
                resp.context.envelope_meta = reply.meta
            return
        resp.media = reply


class DownloadFile:
    """``GET`` a file, streamed: ``handler(values, user)``'s :class:`~tracebus.trace.routes.Download`
    (the envelope leaves a file alone)."""

    def __init__(self, handler, enveloped: str):
        self.handler, self.enveloped = handler, enveloped

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        download: Download = self.handler(query_values(req), req.context.user)
        resp.downloadable_as = download.filename
        streaming.stream(resp, (line.encode("utf-8") for line in download.lines), download.content_type,
                         f"download {download.filename}")


def resource(route: Route, env, max_body_bytes: int, offloop):
    """The resource of a kind's ``route``, its handler built over ``env`` (a :class:`~tracebus.trace.routes.Env`)."""
    handler = route.handler(env)
    if route.serves == "now-or-job":
        return NowOrJobRequest(handler, max_body_bytes, offloop, route.enveloped)
    return {"job-status": JobStatus, "job-result": JobResult, "lookup": Lookup,
            "download": DownloadFile}[route.serves](handler, route.enveloped)
