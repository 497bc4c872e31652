"""``POST /api/trace/events``: answer a trace synchronously (200) or as a job (202)."""

from __future__ import annotations

import falcon

from api import streaming
from dataclasses import replace

from api.inputs import read_json, wants_fresh
from api.resources import accepted

#: Chunks of the synchronous body pulled before answering: the opening, the first domain's
#: opening and its first batch, so a source that cannot be queried is still a 503.
SYNC_PRIMED_CHUNKS = 3


def job_links(job_id: str) -> dict[str, str]:
    """The URLs of a job's status, result, stream and events."""
    status_url = f"/api/trace/job/{job_id}"
    return {"status_url": status_url, "result_url": f"{status_url}/result",
            "stream_url": f"{status_url}/stream", "events_url": f"{status_url}/events"}


class TraceEvents:
    """The trace-events request.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
        max_body_bytes(int): the largest accepted body.
        offloop: makes the synchronous body's chunks off the event loop (:meth:`api.offloop.OffLoop.iterate`).
    """

    #: The dashboard's route: in the original's envelope unless TRACEBUS_API_DASHBOARD_ENVELOPE=0.
    enveloped = "dashboard"

    def __init__(self, service, max_body_bytes: int, offloop=lambda chunks: chunks):
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.offloop = offloop

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        trace = self.service.parse(read_json(req, self.max_body_bytes), req.context.user)
        if wants_fresh(req):
            trace = replace(trace, fresh=True)
        if not self.service.is_async(trace):
            body = streaming.primed(self.offloop(self.service.run_sync(trace)), SYNC_PRIMED_CHUNKS)
            streaming.stream(resp, body, falcon.MEDIA_JSON, "synchronous trace")
            return
        cached = None if trace.fresh else self.service.spool_hit(trace)
        if cached is not None:  # an MSD analysis already stored: 200 at once (MSD.md section 5)
            resp.media = cached
            return
        job_id = self.service.submit(trace)
        accepted(resp, {"stage": "events", "async": True, "job_id": job_id, **job_links(job_id),
                        "cid_count": trace.cid_count, "domains": trace.domains,
                        "estimated_seconds": self.service.estimated_seconds(trace)})
