"""``/api/trace/job/{job_id}[/result|/stream|/events]``: one job's status and result.

Routes use Falcon suffixes on one resource: ``on_get`` (status as the dashboard's poller
reads it), ``on_get_result`` (one page of one domain, or the whole result), ``on_get_stream``
(NDJSON or msgpack, compressed or not, finished or followed) and ``on_get_events`` (SSE).
"""

from __future__ import annotations

import falcon

from tracebus.trace import ndjson
from tracebus.trace.dashview import dashboard_status
from tracebus.trace.states import EVENTS_PARTIAL_FAILURE

from api import encodings, sse, streaming
from api.inputs import MAX_OFFSET, OFFSET, text_param

#: Rows per page when ``limit`` is not given (the original's batch size).
DEFAULT_PAGE_ROWS = 5000
#: Longest ``domain`` accepted (domain names are far shorter).
MAX_DOMAIN_LENGTH = 64


class TraceJob:
    """A job of the caller.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
        settings: page cap and SSE timings (``api_max_page_rows``, ``api_sse_*``).
    """

    #: The dashboard's route: in the original's envelope unless TRACEBUS_API_DASHBOARD_ENVELOPE=0.
    enveloped = "dashboard"

    def __init__(self, service, settings):
        self.service = service
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        resp.media = dashboard_status(self.service.status(job_id, user=req.context.user))

    def on_get_result(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        """One page of one domain; or, without ``domain`` or with ``limit=0``, the whole result
        in the original's shape, streamed (``follow=1``: from now on, while the job runs). A
        domain the job lacks is a 404 naming the job's domains."""
        user = req.context.user
        domain = text_param(req, "domain", MAX_DOMAIN_LENGTH)
        offset = OFFSET.read(req)
        limit = req.get_param_as_int("limit", min_value=0, max_value=MAX_OFFSET)
        partial = req.get_param_as_bool("partial", default=False)
        max_rows = self.settings.api_max_page_rows
        if limit is not None and limit > max_rows:
            raise falcon.HTTPInvalidParam(f"The value must be at most {max_rows} (or 0: no limit).", "limit")
        if domain:
            own = self.service.status(job_id, user=user)["domains"]  # 404 first for another's job
            if domain not in own:  # a typo must not look like an empty result
                raise falcon.HTTPNotFound(description=(
                    f"job {job_id} has no domain {domain!r}; its domains: {', '.join(own) or 'none'}"))
        if not domain or limit == 0:
            follow = req.get_param_as_bool("follow", default=False)
            body = self.service.full_result(job_id, domain, offset, limit or None, user=user, follow=follow)
            streaming.stream(resp, body, falcon.MEDIA_JSON, f"full result of {job_id}")
            return
        limit = min(DEFAULT_PAGE_ROWS, max_rows) if limit is None else limit
        page = self.service.page(job_id, domain, offset, limit, partial, user=user)
        rows = page["rows"]
        body = {
            "stage": "events", "job_id": job_id, "status": page["status"],
            "domain": domain, "offset": offset, "limit": limit, "count": len(rows),
            "total": page["total"], "next_offset": page["next_offset"], "complete": page["complete"],
            "columns": page["columns"],
            "results": {domain: {"data": rows, "count": len(rows), "total": page["total"]}},
            "aggregation": None, "failed_domains": page["failed_domains"],
        }
        if page["failed_domains"]:
            body["code"] = EVENTS_PARTIAL_FAILURE
        resp.media = body

    def on_get_stream(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        """The result as NDJSON (compressed if the client offers it) or, with ``Accept:
        application/vnd.msgpack``, in the binary wire format; ``follow=1``: from now on, while
        the job runs."""
        follow = req.get_param_as_bool("follow", default=False)
        binary = encodings.wants_binary(req, ndjson.CONTENT_TYPE)
        encoding = ndjson.BINARY if binary else ndjson.NDJSON
        lines = self.service.stream(job_id, user=req.context.user, encoding=encoding, follow=follow)
        if not binary:  # the binary format forwards stored bytes: nothing to build ahead
            lines = encodings.ahead(lines, encodings.AHEAD_PIECES)
            coding = encodings.choose_coding(req.get_header("Accept-Encoding"))
            if coding is not None:
                lines = encodings.compressed(lines, coding)
                resp.set_header("Content-Encoding", coding)
        resp.set_header("Vary", encodings.VARY)
        streaming.stream(resp, lines, encoding.content_type, f"result stream of {job_id}")

    def on_get_events(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        user = req.context.user
        last_id = sse.check_event_id(req.get_header("Last-Event-ID"))
        self.service.status(job_id, user=user)  # 404 now, not inside the stream
        events = sse.ProgressEvents(self.service, job_id, user, last_id,
                                    self.settings.api_sse_heartbeat_s, self.settings.api_sse_max_s)
        streaming.stream(resp, iter(events), sse.CONTENT_TYPE, f"event stream of {job_id}")
