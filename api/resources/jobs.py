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

from tracebus.jobs.fields import Flag, Int, Text
from tracebus.jobs.shapes import Query
from tracebus.jobs.states import JOB_CANCELLED, JOB_FAILED

from api import encodings, sse, streaming
from api.inputs import OFFSET, query

#: Rows per page when ``limit`` is not given (the original's batch size).
DEFAULT_PAGE_ROWS = 5000
#: Longest ``domain`` accepted (domain names are far shorter).
MAX_DOMAIN_LENGTH = 64
#: falcon's words for a query parameter that is not a boolean (what its get_param_as_bool answered).
NOT_A_FLAG = 'The "{name}" parameter is invalid. The value of the parameter must be "true" or "false".'
#: ``domain`` of a job's rows (its length bounded: domain names are far shorter).
DOMAIN = Text("domain", nullable=True, nonempty=False, max_length=MAX_DOMAIN_LENGTH,
              invalid='The "{name}" parameter is invalid. The value must be at most {max} characters.',
              description="a domain of the job; absent: every domain; one the job lacks: 404")
#: ``follow`` of a whole result or stream.
FOLLOW = Flag("follow", words=True, invalid=NOT_A_FLAG, description=(
    "the whole result (no page): start now, even while the job runs, and write each domain's rows as its "
    "units commit; the document ends when the job ends (a job cancelled or failed meanwhile: `code` "
    f"{JOB_CANCELLED} / {JOB_FAILED} in it)"))
#: ``GET /api/trace/job/{id}/result``; ``limit``'s bound is the limit ``page_rows`` (TRACEBUS_API_MAX_PAGE_ROWS).
RESULT_QUERY = Query((
    DOMAIN, OFFSET,
    Int("limit", minimum=0, maximum="page_rows",
        too_big='The "{name}" parameter is invalid. The value must be at most {max} (or 0: no limit).',
        description=f"rows per page (with `domain`: {DEFAULT_PAGE_ROWS} by default, or the most allowed if "
                    "fewer); 0: no limit (the whole domain, streamed)"),
    Flag("partial", words=True, invalid=NOT_A_FLAG,
         description="while the job runs: read the completed prefix instead of answering 409"),
    FOLLOW))
#: ``GET /api/trace/job/{id}/stream``.
STREAM_QUERY = Query((Flag("follow", words=True, invalid=NOT_A_FLAG,
                           description="start now, even while the job runs (no 409), and end when it ends"),))


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
        max_rows = self.settings.api_max_page_rows
        q = query(req, RESULT_QUERY, {"page_rows": max_rows})
        domain, offset, limit, partial = q["domain"], q["offset"], q["limit"], q["partial"]
        if domain:
            own = self.service.status(job_id, user=user)["domains"]  # 404 first for another's job
            if domain not in own:  # a typo must not look like an empty result
                raise falcon.HTTPNotFound(description=(
                    f"job {job_id} has no domain {domain!r}; its domains: {', '.join(own) or 'none'}"))
        if not domain or limit == 0:
            follow = q["follow"]
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
        follow = query(req, STREAM_QUERY)["follow"]
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
