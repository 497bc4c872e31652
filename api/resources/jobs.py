"""``/api/trace/job/{job_id}[/result|/stream|/events]``: one job's status and result.

Routes use Falcon suffixes on one resource: ``on_get`` (status), ``on_get_result`` (one
page of one domain), ``on_get_stream`` (NDJSON) and ``on_get_events`` (SSE).
"""

from __future__ import annotations

import falcon

from tracebus.errors import InvalidParams
from tracebus.trace import domains, ndjson

from api import sse, streaming
from api.inputs import paging

#: Rows per page when ``limit`` is not given (the original's batch size).
DEFAULT_PAGE_ROWS = 5000


class TraceJob:
    """A job of the caller.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
        settings: page cap and SSE timings (``api_max_page_rows``, ``api_sse_*``).
    """

    def __init__(self, service, settings):
        self.service = service
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = self.service.status(job_id, user=req.context.user)

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        user = req.context.user
        domain = req.get_param("domain")
        if not domain:
            known = self.service.status(job_id, user=user)["domains"]
            raise InvalidParams(f"query parameter domain is required; job {job_id} has: {', '.join(known)}")
        offset, limit = paging(req, min(DEFAULT_PAGE_ROWS, self.settings.api_max_page_rows),
                               self.settings.api_max_page_rows)
        partial = req.get_param_as_bool("partial", default=False)
        page = self.service.page(job_id, domain, offset, limit, partial, user=user)
        rows = page["rows"]
        body = {
            "stage": "events", "job_id": job_id, "status": page["status"],
            "domain": domain, "offset": offset, "limit": limit, "count": len(rows),
            "total": page["total"], "next_offset": page["next_offset"], "complete": page["complete"],
            "columns": page["columns"] or list(domains.COLUMNS.get(domain, ())),
            "results": {domain: {"data": rows, "count": len(rows), "total": page["total"]}},
            "aggregation": None, "failed_domains": page["failed_domains"],
        }
        if page["failed_domains"]:
            body["code"] = "EVENTS_PARTIAL_FAILURE"
        resp.media = body

    def on_get_stream(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        lines = self.service.stream(job_id, user=req.context.user)
        streaming.stream(resp, lines, ndjson.CONTENT_TYPE, f"NDJSON stream of {job_id}")

    def on_get_events(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        user = req.context.user
        last_id = sse.check_event_id(req.get_header("Last-Event-ID"))
        self.service.status(job_id, user=user)  # 404 now, not inside the stream
        events = sse.ProgressEvents(self.service, job_id, user, last_id,
                                    self.settings.api_sse_heartbeat_s, self.settings.api_sse_max_s)
        streaming.stream(resp, iter(events), sse.CONTENT_TYPE, f"event stream of {job_id}")
