"""OpenAPI paths and schemas of the generic job contract, the typed export, ``POST /api/v1/jobs``
and the routes the kinds declare (part of :mod:`api.openapi`).

``/api/job/{job_id}[/result|/abandon]`` (:mod:`api.resources.generic`) answer in the original's
envelope whatever ``TRACEBUS_API_ENVELOPE`` says, so they are documented enveloped already.
"""

from __future__ import annotations

from api.resources.generic import ABANDON_REQUEST, PREFIX_QUERY
from api.resources.v1 import EXPORT_QUERY, submit_request
from tracebus.jobs import contract, export
from tracebus.jobs.states import JOB_CANCELLED, PUBLIC_CODE, PUBLIC_STATUS, words
from tracebus.trace import installed

_OBJ, _STR, _INT = {"type": "object"}, {"type": "string"}, {"type": "integer"}
_NULL_STR, _NULL_NUM = {"type": ["string", "null"]}, {"type": ["number", "null"]}


def _enveloped(data: dict) -> dict:
    return {"type": "object", "required": ["success", "data", "meta"], "properties": {
        "success": {"const": True}, "data": data,
        "meta": {"type": "object", "required": ["timestamp", "app_version"],
                 "properties": {"timestamp": _STR, "app_version": _STR}}}}


def generic_schemas() -> dict:
    return {
        "GenericStatus": _enveloped({
            "type": "object", "required": ["job_id", "status", "progress", "pct", "stage", "completed_stages",
                                           "query_id", "dataset_id", "elapsed_seconds", "created_at", "error"],
            "properties": {
                "job_id": _STR, "kind": {**_STR, "description": "the job's kind: its `prefix`"},
                "status": {"type": "string", "enum": words(PUBLIC_STATUS),
                           "description": "the poller stops on completed and failed; a cancelled (abandoned) "
                                          f"job is failed with code {JOB_CANCELLED}"},
                "state": {**_STR, "description": "the internal state (partial, cancelled, ...)"},
                "code": {"type": "string", "enum": words(PUBLIC_CODE)},
                "progress": {**_STR, "description": "'' while queued, what runs (e.g. 'fetching events (3/10 "
                                                    "units)'), 'complete', 'failed', 'cancelled'"},
                "pct": {"type": "integer", "minimum": 0, "maximum": 100},
                "stage": {**_NULL_STR, "description": "while running: the first section not yet done"},
                "completed_stages": {"type": "array", "items": _STR, "description": "sections all done"},
                "query_id": {**_NULL_STR, "description": "the key of the result (once completed; a stage "
                                                         "job's query id from the start)"},
                "dataset_id": {**_NULL_STR, "description": "an MSD job's trace_query_id, once completed"},
                "elapsed_seconds": {"type": "number"}, "created_at": _NULL_NUM, "completed_at": _NULL_NUM,
                "error": _NULL_STR, "failed_sections": {"type": "array", "items": _STR},
                "reused_from": {**_NULL_STR, "description": "the id of the stored result this job was "
                                "answered from (an identical request's), else null"},
                "result_age_s": {"type": ["number", "null"], "description": "seconds since that result "
                                 "completed"}}}),
        "GenericResult": _enveloped({**_OBJ, "description": (
            "the kind's result: a trace job's FullResult, a stage job's SeedResult or LineageResult, "
            "any other kind's {job_id, kind, results: {section: {data, columns, count}}, failed_sections}")}),
        "Abandoned": _enveloped({"type": "object", "required": ["job_id", "status", "already_abandoned"],
                                 "properties": {"job_id": _STR, "status": {"const": "abandoned"},
                                                "already_abandoned": {"type": "boolean"}}}),
    }


def generic_paths(op, json_, ref, job_param: dict) -> dict:
    """The three routes; ``op``, ``json_``, ``ref``: :mod:`api.openapi`'s builders."""
    param = {**job_param, "description": "`<kind>-<24 hex>` of a job of any kind"}
    prefix, = PREFIX_QUERY.parameters()
    base = "/api/job/{job_id}"
    return {
        base: {"get": op("Status of a job of any kind, as the dashboard's generic poller reads it "
                         "(always enveloped)", {"200": json_(ref("GenericStatus"), "the status")},
                         ("400", "404", "429", "503"), [param, prefix])},
        base + "/result": {"get": op(
            "The result of a completed job of any kind, streamed (always enveloped)",
            {"200": json_(ref("GenericResult"), "the result document")},
            ("400", "404", "409", "429", "503"), [param, prefix])},
        base + "/abandon": {"post": op(
            f"Abandon a queued or running job: it is cancelled, and reads failed with {JOB_CANCELLED} "
            "(always enveloped)",
            {"200": json_(ref("Abandoned"), "cancelled now, or already (already_abandoned)")},
            ("400", "404", "409", "429", "503"), [param],
            requestBody={"required": False, "content": {"application/json": {"schema": ABANDON_REQUEST.schema()}}},
            description="409 JOB_ALREADY_TERMINAL when the job completed or failed first")},
    }


def export_path(op, ref, job_param: dict) -> dict:
    """``GET /api/v1/jobs/{job_id}/export``."""
    binary = {"type": "string", "format": "binary"}
    content = {media.split(";")[0]: {"schema": binary if fmt != "csv" else _STR}
               for fmt, media in export.CONTENT_TYPES.items()}
    ok = {"description": "the domain, one Parquet row group / Arrow record batch per stored chunk, typed "
                         "columns (README: 'Results for data tools'); CSV: header, then the rows",
          "headers": {"Content-Disposition": {"schema": _STR}}, "content": content}
    unavailable = {"description": "FORMAT_UNAVAILABLE: Parquet or Arrow without pyarrow on the server",
                   "content": {"application/json": {"schema": ref("Error")}}}
    return {"/api/v1/jobs/{job_id}/export": {"get": op(
        "One domain of a completed job as Parquet, Arrow or CSV, streamed chunk by chunk",
        {"200": ok, "406": unavailable}, ("400", "404", "409", "429", "503"),
        [job_param, *EXPORT_QUERY.parameters()])}}


def submit_path(op) -> dict:
    """``POST /api/v1/jobs``: a job of a kind the registered kinds submit (the declared query kinds)."""
    return {"post": op(
        "Submit a job of a declared query kind (whatever its span)",
        {"202": {"description": "the job; its status and result are the generic contract's",
                 "content": {"application/json": {"schema": contract.ACCEPTED_SCHEMA}}}},
        ("400", "413", "429", "503", "507"),
        requestBody={"required": True, "content": {"application/json": {"schema": submit_request().schema()}}})}


def kind_paths(settings, op, json_, job_param: dict) -> dict:
    """The routes the kinds declare (:func:`tracebus.trace.installed.routes`), each operation from
    its :class:`~tracebus.trace.routes.Doc`: a JSON answer given as ``(schema, description)`` of an
    ``always`` enveloped route is documented in the envelope (a whole response object is as
    written); ``op``, ``json_``: :mod:`api.openapi`'s builders."""
    paths: dict = {}
    for route in installed.routes():
        doc = route.doc(settings)
        responses = {}
        for status, response in doc.responses.items():
            if isinstance(response, tuple):
                schema, description = response
                response = json_(_enveloped(schema) if route.enveloped == "always" else schema, description)
            responses[status] = response
        params = [{**job_param, "description": doc.job_id}] if "{job_id}" in route.path else []
        extra = {"requestBody": {"required": True, "content": {"application/json": {"schema": doc.body}}}} \
            if doc.body is not None else {}
        if doc.description:
            extra["description"] = doc.description
        paths.setdefault(route.path, {})[route.method.lower()] = op(doc.summary, responses, doc.errors,
                                                                     params + list(doc.params), **extra)
    return paths


def always_enveloped() -> set[str]:
    """The paths of the kinds' routes answered in the original's envelope whatever the settings say."""
    return {route.path for route in installed.routes() if route.enveloped == "always"}


def dashboard_enveloped() -> set[str]:
    """The paths of the kinds' routes enveloped unless ``TRACEBUS_API_DASHBOARD_ENVELOPE=0``."""
    return {route.path for route in installed.routes() if route.enveloped == "dashboard"}
