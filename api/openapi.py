"""The OpenAPI 3.1 document served at ``GET /openapi.json``.

Built from plain dicts by :func:`document`: the API's own routes here (their request bodies and
query strings from the declarations beside their resources), the monitor's and the generic
contract's in :mod:`api.openapi_monitor` and :mod:`api.openapi_generic`, and every route a kind
declares from its :class:`~tracebus.trace.routes.Doc` (:func:`api.openapi_generic.kind_paths`);
only the answers' schemas are written out. ``tests/test_api_openapi.py`` validates it and checks
that it lists exactly the routes and methods the app serves, so a route added to :mod:`api.app`
without a description fails the suite.
"""

from __future__ import annotations

from api.gunicorn_errors import MAX_HEADER_FIELD_BYTES, MAX_HEADER_FIELDS, MAX_REQUEST_LINE
from api.identity import MAX_USER_LENGTH
from api.resources.jobs import DEFAULT_PAGE_ROWS, RESULT_QUERY, STREAM_QUERY
from api.resources.v1 import LIST_QUERY
from api.settings import ApiSettings
from api.openapi_generic import (always_enveloped, dashboard_enveloped, export_path, generic_paths, generic_schemas,
                                 kind_paths, submit_path)
from api.openapi_monitor import monitor_paths, monitor_schemas
from api.sse import EVENT_ID_PATTERN
from tracebus.jobs.ids import JOB_ID_PATTERN, MAX_JOB_ID_LENGTH
from tracebus.jobs.states import JOB_CANCELLED, JOB_FAILED, words
from tracebus.trace import installed
from tracebus.trace.states import EVENTS_PARTIAL_FAILURE, POLLER_CODE, POLLER_STATUS, V1_CODE, V1_STATUS

_OBJ, _STR, _INT, _BOOL = {"type": "object"}, {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_NULLABLE_NUM = {"type": ["number", "null"]}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict:
    return _json(_ref("Error"), description)


_ERRORS = {
    "400": _error("Malformed request: INVALID_PARAMS / INVALID_PROFILE; the message says what is wrong "
                  f"(on every route: a user header longer than {MAX_USER_LENGTH} characters or not printable)."),
    "401": _error("UNAUTHORIZED: bearer tokens are configured and the request has no valid one."),
    "404": _error("JOB_NOT_FOUND (unknown, expired, or another user's job, or not a job id at all) or "
                  "JOB_RESULT_EXPIRED; seed-resolve: NO_DETECTION_RECORDS (container mode found no lot "
                  "at the station); MSD detail and export: QUERY_NOT_FOUND (not a trace_query_id)."),
    "409": _error("JOB_NOT_COMPLETE (top-level `status` says where the job is) or JOB_STATE_CONFLICT."),
    "410": _error("CACHE_EXPIRED: the stored MSD result of this trace_query_id expired; run the query again."),
    "413": _error("CID_LIMIT_EXCEEDED (error has `cid_count` and `limit`) or PAYLOAD_TOO_LARGE."),
    "429": _error("QUOTA_EXCEEDED: too many queued or running jobs; BUDGET_EXCEEDED: the caller's jobs "
                  "and answers hold their Redis budget (TRACE_USER_MAX_BYTES; error has `spent_bytes` and "
                  "`max_bytes`); or TOO_MANY_REQUESTS: the caller passed a rate limit "
                  "(TRACEBUS_RATE_LIMITS; `retry_after_seconds`); see Retry-After."),
    "503": _error("SERVICE_UNAVAILABLE: Redis unreachable (SOURCE_UNAVAILABLE: the event source); "
                  "see Retry-After."),
    "507": _error("REDIS_FULL: Redis reached maxmemory (noeviction) and refuses new jobs until memory "
                  "is freed; see Retry-After."),
}
#: What gunicorn answers itself, before the app, to any request: the JSON error body too
#: (api/gunicorn_errors.py replaces its HTML page).
_SERVER_ERRORS = {
    "414": _error(f"URI Too Long: the request line exceeds {MAX_REQUEST_LINE} bytes (gunicorn's limit)."),
    "431": _error(f"Request Header Fields Too Large: more than {MAX_HEADER_FIELDS} header fields, or one over "
                  f"{MAX_HEADER_FIELD_BYTES} bytes (gunicorn's limits)."),
}
_JOB_ID = {"name": "job_id", "in": "path", "required": True,
           "schema": {"type": "string", "pattern": JOB_ID_PATTERN, "maxLength": MAX_JOB_ID_LENGTH},
           "description": "`trace-evt-<24 hex>` (96 random bits: holding an anonymous job's id "
                          "is what grants access to it); anything else is 404 JOB_NOT_FOUND."}
#: One server-sent event as its fields (the data is JSON text on one line).
_SSE_EVENT = {"type": "object", "properties": {
    "event": {"type": "string", "enum": ["progress", "end", "error"]}, "data": _STR,
    "id": {"type": "string", "pattern": EVENT_ID_PATTERN}, "retry": {"type": "integer", "minimum": 0}}}


def _op(summary: str, responses: dict, errors: tuple[str, ...], params: list | None = None,
        protected: bool = True, **extra) -> dict:
    op = {"summary": summary, "responses": {**responses, **{c: _ERRORS[c] for c in errors}, **_SERVER_ERRORS}}
    params = list(params or [])
    if protected:
        params.insert(0, {"$ref": "#/components/parameters/User"})
        op["security"] = [{}, {"bearerAuth": []}]
        op["responses"].setdefault("400", _ERRORS["400"])  # the user header
        op["responses"].setdefault("401", _ERRORS["401"])
    if params:
        op["parameters"] = params
    return {**op, **extra}


def _schemas(settings: ApiSettings) -> dict:
    status = {"type": "string", "enum": words(V1_STATUS)}
    job_status = {"type": "object", "required": ["job_id", "status", "state", "progress"], "properties": {
        "job_id": _STR, "status": status,
        "state": {"type": "string", "description": "internal state; `partial` is shown as status completed"},
        "code": {"type": "string", "enum": words(V1_CODE)},
        "profile": _STR, "user": _STR, "cid_count": _INT, "domains": {"type": "array", "items": _STR},
        "progress": {"type": "object", "properties": {
            "units_done": _INT, "units_failed": _INT, "units_total": _INT, "rows": _INT, "stage": _STR}},
        "created_at": _NULLABLE_NUM, "started_at": _NULLABLE_NUM, "finished_at": _NULLABLE_NUM,
        "elapsed_seconds": {"type": "number"}, "estimated_remaining_seconds": _NULLABLE_NUM,
        "error": {"type": ["string", "null"]}, "failed_domains": {"type": "array", "items": _STR},
        "reused_from": {"type": ["string", "null"], "description": "the id of the stored result "
                       "this job was answered from (an identical request's, TRACE_RESULT_REUSE_MAX_AGE_S), "
                       "else null"},
        "result_age_s": {"type": ["number", "null"], "description": "seconds since that result completed"},
        "fresh": {"type": "boolean", "description": "the request asked to run again (Cache-Control: no-cache)"}}}
    rows = {"type": "array", "items": _OBJ, "description": "rows as objects keyed by Oracle column name"}
    quality = {"type": "object", "required": ["status", "scope", "reasons"], "properties": {
        "status": {"type": "string", "enum": ["complete", "truncated", "partial", "failed"]},
        "scope": {"type": "string", "enum": ["domain", "query", "export"]},
        "reasons": {"type": "array", "items": _STR}, "domain": _STR,
        "observed_rows": {"type": ["integer", "null"]}, "failed_domains": {"type": "array", "items": _STR}}}
    return {
        "Error": {"type": "object", "required": ["error"], "properties": {
            "error": {"type": "object", "required": ["code", "message"], "additionalProperties": True,
                      "properties": {"code": _STR, "message": _STR, "cid_count": _INT, "limit": _INT}},
            "status": {**status, "description": "with JOB_NOT_COMPLETE: the job's status"}}},
        "TraceRequest": installed.events_request_schema({"cid_limit": settings.events_cid_limit}),
        "SyncResult": {"type": "object", "properties": {
            "stage": {"const": "events"}, "aggregation": {"type": "null"},
            "results": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "data": rows, "count": _INT}}}}},
        "SpoolHit": {"type": "object", "required": ["stage", "spool_hit", "trace_query_id", "aggregation"],
                     "properties": {"stage": {"const": "events"}, "spool_hit": {"const": True},
                                    "trace_query_id": _STR, "query_id": _STR,
                                    "aggregation": {"type": "object"}, "results": {"type": "object"}}},
        "Accepted": {"type": "object", "required": ["job_id", "status_url", "stream_url"], "properties": {
            "stage": {"const": "events"}, "async": {"const": True}, "job_id": _STR,
            "status_url": _STR, "result_url": _STR, "stream_url": _STR, "events_url": _STR,
            "cid_count": _INT, "domains": {"type": "array", "items": _STR},
            "estimated_seconds": _INT}},
        "JobStatus": job_status,
        "DashboardStatus": _dashboard_status(job_status),
        "QualityMeta": quality,
        "FullResult": {"type": "object", "required": [
            "stage", "results", "aggregation", "quality_meta", "domain_quality_meta", "query_id"],
            "description": ("The whole result (no `domain`, or `limit=0`), as the original's; "
                            "streamed chunk by chunk. Failed "
                            "domains have no `results` entry and are listed in `failed_domains`."),
            "properties": {
                "stage": {"const": "events"}, "job_id": _STR,
                "results": {"type": "object", "additionalProperties": {
                    "type": "object", "required": ["data", "count", "total", "quality_meta"], "properties": {
                        "data": rows, "count": _INT, "total": _INT, "quality_meta": _ref("QualityMeta")}}},
                "aggregation": {"type": ["object", "null"]}, "quality_meta": _ref("QualityMeta"),
                "domain_quality_meta": {"type": "object", "additionalProperties": _ref("QualityMeta")},
                "query_id": _STR, "trace_query_id": {"type": ["string", "null"]},
                "error": _STR, "code": {"type": "string", "enum": [EVENTS_PARTIAL_FAILURE]},
                "failed_domains": {"type": "array", "items": _STR}}},
        "JobDetail": {"allOf": [job_status, {"type": "object", "properties": {
            "params": _OBJ,
            "domain_states": {"type": "array", "items": {"type": "object", "properties": {
                "domain": _STR, "state": _STR, "units_total": _INT, "units": _OBJ, "rows": _INT}}},
            "units": {"type": "array", "items": {"type": "object", "properties": {
                "unit": _INT, "domain": _STR, "chunk": _INT, "state": _STR, "attempt": _INT,
                "rows": _INT, "error": {"type": ["string", "null"]},
                "started_at": _NULLABLE_NUM, "finished_at": _NULLABLE_NUM}}}}}]},
        "JobList": {"type": "object", "properties": {
            "jobs": {"type": "array", "items": job_status}, "total": _INT, "offset": _INT, "limit": _INT,
            "next_offset": {"type": ["integer", "null"]}}},
        "ResultPage": {"type": "object", "description": (
            "One page of one domain. The rows are in `results.<domain>.data` (the original's "
            "shape); the flat fields describe the page. Offsets never shift: with partial=1 "
            "only the completed prefix of chunks is readable and later rows append at `total`."),
            "properties": {
                "stage": {"const": "events"}, "job_id": _STR, "status": status, "domain": _STR,
                "offset": _INT, "limit": _INT, "count": _INT, "total": _INT,
                "next_offset": {"type": ["integer", "null"]}, "complete": _BOOL,
                "columns": {"type": "array", "items": _STR},
                "results": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "data": rows, "count": _INT, "total": _INT}}},
                "aggregation": {"type": "null"}, "failed_domains": {"type": "array", "items": _STR},
                "code": {"type": "string", "enum": [EVENTS_PARTIAL_FAILURE]}}},
        **installed.schemas(settings),
        **monitor_schemas(),
        **generic_schemas(),
        "Ready": {"type": "object", "properties": {
            "status": {"type": "string", "enum": ["ready", "not ready"]},
            "missing": {"type": "array", "items": {"type": "string",
                                                   "enum": ["redis", "redis_memory", "workers", "source"]}},
            "redis": _STR, "workers": _INT, "queue": _STR,
            "source": {**_STR, "description": "the event source: `ok`, `embedded` (SQLite) or "
                                              "`unreachable: <why>` (then `missing` names `source`)"}}},
    }


def _dashboard_status(job_status: dict) -> dict:
    """``GET /api/trace/job/{id}`` as the dashboard's poller reads it (tracebus.trace.dashview)."""
    props = {**job_status["properties"],
             "status": {"type": "string", "enum": words(POLLER_STATUS),
                        "description": "the poller stops on completed and failed; a cancelled job "
                                       f"is failed with code {JOB_CANCELLED} (`state` says cancelled)"},
             "code": {"type": "string", "enum": words(POLLER_CODE)},
             "progress": {"type": "string", "description": (
                 "the original's string: '' (queued), 'fetching events (n/m units)', 'complete', "
                 "'failed', 'cancelled'")},
             "progress_detail": job_status["properties"]["progress"],
             "query_id": {"type": "string", "description": "once completed: the key of the result"},
             "trace_query_id": {"type": ["string", "null"], "description": "once completed: MSD jobs"}}
    return {"type": "object", "required": ["job_id", "status", "state", "progress", "progress_detail"],
            "properties": props}


def _paths(settings: ApiSettings) -> dict:
    job = [_JOB_ID]
    return {
        "/api/trace/events": {"post": _op(
            "Run a trace: rows now (200) at or below the async threshold, else a job (202)",
            {"200": _json({"anyOf": [_ref("SyncResult"), _ref("SpoolHit")]},
                          f"<= {settings.async_cid_threshold} CIDs: the rows, streamed; or, for a "
                          f"{' or '.join(installed.stored_profiles())} request already analysed with the same masks, "
                          "its stored aggregation (spool hit)"),
             "202": _json(_ref("Accepted"), "a job was admitted, or the caller's identical job in flight "
                          "returned, or a job of the caller's own answered from an identical request's "
                          "result, stored or in flight (its status says reused_from; a request with "
                          "Cache-Control: no-cache runs again)")},
            ("400", "413", "429", "503", "507"),
            requestBody={"required": True,
                         "content": {"application/json": {"schema": _ref("TraceRequest")}}})},
        "/api/trace/job/{job_id}": {"get": _op(
            "Status of a job, as the dashboard's poller reads it",
            {"200": _json(_ref("DashboardStatus"), "the status document")}, ("404", "429", "503"), job)},
        "/api/trace/job/{job_id}/result": {"get": _op(
            "One page of one domain's rows; or the whole result in the original's shape, streamed",
            {"200": _json({"anyOf": [_ref("ResultPage"), _ref("FullResult")]},
                          f"with `domain` and a `limit` >= 1 (default {DEFAULT_PAGE_ROWS}): a ResultPage; otherwise "
                          "the FullResult")},
            ("400", "404", "409", "429", "503"),
            job + RESULT_QUERY.parameters({"page_rows": settings.api_max_page_rows}))},
        "/api/trace/job/{job_id}/stream": {"get": _op(
            "The whole result as NDJSON or msgpack, streamed chunk by chunk; with follow=1 while the job runs",
            {"200": {"description": "lines: meta, then per domain domain_start, records (one per chunk), "
                                    f"domain_end; warning ({EVENTS_PARTIAL_FAILURE}) when domains failed; "
                                    "complete{total_records}; an error line if a chunk expires mid-stream. "
                                    "NDJSON by default, gzip- or zstd-compressed (flushed per chunk) when "
                                    "Accept-Encoding offers it (Content-Encoding says which). With Accept: "
                                    "application/vnd.msgpack: the same lines as msgpack maps one after "
                                    "another, a records map carrying `chunk` (bin: byte 0 is 0 for msgpack or "
                                    "1 for zlib'd msgpack of {columns, rows}) instead of `data`. With "
                                    "follow=1: chunks as units commit; domain_start.total is null for a "
                                    "domain still running; a failed domain ends with domain_end{failed: "
                                    "true}; a cancelled or failed job ends with an error line "
                                    f"({JOB_CANCELLED}, {JOB_FAILED}; FOLLOW_TIMEOUT after "
                                    "TRACE_JOB_TIMEOUT_SECONDS)",
                     "headers": {"Content-Encoding": {"schema": {"type": "string", "enum": ["gzip", "zstd"]},
                                                      "description": "present when the NDJSON is compressed"},
                                 "Vary": {"schema": _STR}},
                     "content": {"application/x-ndjson": {"schema": _STR},
                                 "application/vnd.msgpack": {"schema": {"type": "string", "format": "binary"}}}}},
            ("400", "404", "409", "429", "503"), job + STREAM_QUERY.parameters())},
        "/api/trace/job/{job_id}/events": {"get": _op(
            "Progress as server-sent events until the job ends",
            {"200": {"description": "`event: progress` per progress entry (`id:` is the progress id), "
                                    "`event: end` with the status document (DashboardStatus) when "
                                    "the job is final, "
                                    "`event: error` if the job expires; `: heartbeat` comments in silence",
                     "content": {"text/event-stream": {"schema": _SSE_EVENT}}}},
            ("400", "404", "429", "503"), job + [{
                "name": "Last-Event-ID", "in": "header", "required": False,
                "schema": {"type": "string", "pattern": EVENT_ID_PATTERN},
                "description": "resume after this event id (`<ms>-<seq>`, as sent in `id:`); empty: from "
                               "the start; anything else: 400"}])},
        **generic_paths(_op, _json, _ref, _JOB_ID),
        **export_path(_op, _ref, _JOB_ID),
        **kind_paths(settings, _op, _json, _JOB_ID),
        "/api/v1/jobs": {"get": _op(
            "The caller's jobs, newest first", {"200": _json(_ref("JobList"), "a page of jobs")},
            ("400", "503"), LIST_QUERY.parameters()),
            **submit_path(_op)},
        "/api/v1/jobs/{job_id}": {"get": _op(
            "A job with per-domain and per-unit state", {"200": _json(_ref("JobDetail"), "the job")},
            ("404", "503"), job)},
        "/api/v1/jobs/{job_id}/cancel": {"post": _op(
            "Cancel a queued or running job (running units stop at their next chunk)",
            {"200": _json(_ref("JobStatus"), "the job, cancelled")}, ("404", "409", "503"), job)},
        "/api/v1/jobs/{job_id}/retry": {"post": _op(
            "Re-run the failed and cancelled units of a finished job",
            {"202": _json(_ref("JobStatus"), "the job, queued again")}, ("404", "409", "429", "503", "507"), job)},
        **monitor_paths(_op, _json, _ref),
        "/healthz": {"get": _op("Liveness (no Redis)", {"200": _json(_OBJ, "alive")}, (), protected=False)},
        "/readyz": {"get": _op("Readiness: Redis answers and is not full, a live worker reads the trace queue, "
                               "and the event source's server takes a connection",
                               {"200": _json(_ref("Ready"), "ready"),
                                "503": _json(_ref("Ready"), "not ready; `missing` says what")}, (),
                               protected=False)},
        "/openapi.json": {"get": _op("This document", {"200": _json(_OBJ, "OpenAPI 3.1")}, (),
                                     protected=False)},
        "/metrics": {"get": _op(
            "Prometheus metrics of the whole system: queues, workers, jobs, units and rows, job "
            "durations (read from Redis at each scrape) and the API's HTTP requests by route and "
            "status (summed over its worker processes); names in deploy/README.md",
            {"200": {"description": "the Prometheus text exposition format",
                     "content": {"text/plain": {"schema": _STR}}}}, (),
            protected=False)},
    }


#: Paths whose answers are never enveloped (probes and tools read them as they are).
UNWRAPPED = frozenset({"/healthz", "/readyz", "/openapi.json"})
#: Paths whose answers are always enveloped (documented so already), beside the kinds' routes
#: that say so: the generic job poller reads ``data``.
ALWAYS_WRAPPED = ("/api/job/",)
_META = {"type": "object", "required": ["timestamp", "app_version"], "additionalProperties": True,
         "properties": {"timestamp": _STR, "app_version": _STR,
                        "job_status": {"type": "string", "description": "with JOB_NOT_COMPLETE"},
                        "retry_after_seconds": _INT}}


#: Paths enveloped by default whatever TRACEBUS_API_ENVELOPE says (TRACEBUS_API_DASHBOARD_ENVELOPE=1):
#: the dashboard's trace routes, whose query-tool page reads only ``payload.data``.
DASHBOARD_WRAPPED = ("/api/trace/",)


def _enveloped(doc: dict, everywhere: bool) -> dict:
    """``doc`` with the success answers of :data:`DASHBOARD_WRAPPED` as ``{success: true, data, meta}``
    and, when ``everywhere`` (``TRACEBUS_API_ENVELOPE=1``), every JSON answer but those of
    :data:`UNWRAPPED`, the Error schema then ``{success: false, error, meta}``. (An error of an
    enveloped route validates against either Error schema: extra properties are allowed.)"""
    schemas = doc["components"]["schemas"]
    schemas["Meta"] = _META
    if everywhere:
        bare_error = schemas["Error"]["properties"]["error"]
        schemas["Error"] = {"type": "object", "required": ["success", "error", "meta"], "properties": {
            "success": {"const": False}, "error": bare_error, "meta": _ref("Meta")}}
    always, dashboard = always_enveloped(), dashboard_enveloped()
    for path, ops in doc["paths"].items():
        if not (everywhere or path.startswith(DASHBOARD_WRAPPED) or path in dashboard):
            continue
        for op in ops.values():
            for response in op["responses"].values():
                content = response.get("content", {}).get("application/json")
                if (path in UNWRAPPED or path.startswith(ALWAYS_WRAPPED) or path in always or content is None
                        or content["schema"] == _ref("Error")):
                    continue
                content["schema"] = {"type": "object", "required": ["success", "data", "meta"], "properties": {
                    "success": {"const": True}, "data": content["schema"], "meta": _ref("Meta")}}
    return doc


def document(settings: ApiSettings) -> dict:
    """The OpenAPI document of the app built with ``settings``."""
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "tracebus", "version": "1",
                 "description": "Trace-events jobs of the MES dashboard. Errors are "
                                '`{"error": {"code", "message"}}`; the dashboard\'s routes (/api/trace/*, '
                                "/api/mid-section-defect/*, /api/job/*, /api/query-tool/*) answer in the "
                                "original's `{success, data, meta}` (/api/trace/* unless "
                                "TRACEBUS_API_DASHBOARD_ENVELOPE=0); with TRACEBUS_API_ENVELOPE=1 every "
                                "JSON answer is wrapped as the original's `{success, data, meta}` "
                                "(streams of NDJSON and server-sent events are not). Rate limits per "
                                "bucket and caller answer 429 TOO_MANY_REQUESTS with Retry-After."},
        "paths": _paths(settings),
        "components": {
            "schemas": _schemas(settings),
            "parameters": {"User": {"name": settings.user_header, "in": "header", "required": False,
                                    # printable ASCII: HTTP header values are latin-1 on the wire
                                    "schema": {"type": "string", "maxLength": MAX_USER_LENGTH,
                                               "pattern": "^[ -~]*$"},
                                    "description": "the calling user, set by a reverse proxy: "
                                                   "believed only from TRACEBUS_TRUSTED_PROXIES; "
                                                   "without identity the caller is `anon:<address>`"}},
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer",
                                               "description": "required only when tokens are configured"}},
        },
    }
    if settings.api_envelope or settings.api_dashboard_envelope:
        return _enveloped(doc, everywhere=bool(settings.api_envelope))
    return doc
