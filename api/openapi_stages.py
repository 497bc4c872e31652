"""OpenAPI schemas of the MSD page's stages and lookups (part of :mod:`api.openapi`).

The seed-resolve and lineage requests (derived from their declarations,
:mod:`tracebus.trace.stages.params`) and answers (:mod:`tracebus.trace.stages.answers`), their jobs' 202 answers
and status (:mod:`tracebus.trace.stages.jobs`) and routes (:func:`stage_job_paths`), and the
lookups of ``/api/mid-section-defect/*``, which are documented already enveloped since they always are.
"""

from __future__ import annotations

from tracebus.jobs.states import JOB_CANCELLED, words
from tracebus.trace.stages.jobs import LINEAGE_KIND, SEED_KIND
from tracebus.trace.stages.params import LINEAGE_REQUEST, SEED_REQUEST
from tracebus.trace.states import STAGE_STATUS

_OBJ, _STR, _INT = {"type": "object"}, {"type": "string"}, {"type": "integer"}


def stage_schemas(cid_limit: int) -> dict:
    """The schemas of the stages and the lookups; `cid_limit`: TRACE_EVENTS_CID_LIMIT."""
    strs = {"type": "array", "items": _STR}
    limits = {"cid_limit": cid_limit}
    return {
        "SeedRequest": SEED_REQUEST.schema(limits),
        "SeedResult": {"type": "object", "required": ["stage", "seed_count", "cache_key", "query_id",
                                                      "seed_container_ids"], "properties": {
            "stage": {"const": "seed-resolve"}, "seed_count": _INT, "cache_key": _STR, "query_id": _STR,
            "seed_container_ids": strs, "seeds": {"type": "array", "items": {
                "type": "object", "required": ["container_id", "container_name", "lot_id"],
                "properties": {"container_id": _STR, "container_name": _STR, "lot_id": _STR}}},
            "not_found": {**strs, "description": "serial_number mode: the values that matched nothing"}}},
        "LineageRequest": LINEAGE_REQUEST.schema(limits),
        "LineageResult": {"type": "object", "required": ["stage", "query_id", "total_nodes"], "properties": {
            "stage": {"const": "lineage"}, "query_id": _STR, "trace_lineage_query_id": _STR,
            "total_nodes": _INT, "total_ancestor_count": _INT,
            "seed_roots": {"type": "object", "additionalProperties": _STR},
            "direction": _STR, "ancestors": _OBJ, "children_map": _OBJ, "leaf_serials": _OBJ,
            "parent_map": _OBJ, "merge_edges": _OBJ, "merges": _OBJ, "names": _OBJ, "nodes": _OBJ,
            "edges": {"type": "array"}, "roots": {"type": "array"}},
            "description": "mid_section_defect: the compact answer (ids, counts, seed_roots); query_tool: "
                           "the original's forward tree (roots, children_map, leaf_serials, names, nodes, "
                           "edges); query_tool_reverse: its reverse tree (roots = the seeds, ancestors, "
                           "parent_map, merge_edges, names, nodes, edges, seed_roots)"},
        "StageAccepted": {"type": "object", "required": ["stage", "async", "job_id", "status_url", "query_id"],
                          "description": "the stage runs as a job: poll `status_url` until `status` is "
                                         "completed or failed, then GET `result_url` (`status_url` + /result)",
                          "properties": {
            "stage": {"type": "string", "enum": ["seed-resolve", "lineage"]}, "async": {"const": True},
            "job_id": _STR, "status_url": _STR, "result_url": _STR, "query_id": _STR,
            "cache_key": _STR, "cid_count": _INT}},
        "StageStatus": {"type": "object", "required": ["job_id", "stage", "status", "state", "progress"],
                        "properties": {
            "job_id": _STR, "stage": {"type": "string", "enum": ["seed-resolve", "lineage"]},
            "status": {"type": "string", "enum": words(STAGE_STATUS),
                       "description": "the poller stops on completed and failed (a cancelled job, or one "
                                      "whose unit failed, is failed with `error`; `state` keeps the internal one)"},
            "state": _STR, "code": {"const": JOB_CANCELLED},
            "progress": {"type": "string", "description": "'' (queued), 'resolving seeds' / 'tracing "
                                                          "lineage', 'complete', 'failed', 'cancelled'"},
            "progress_detail": _OBJ, "query_id": {"type": ["string", "null"]}, "profile": _STR,
            "user": _STR, "cid_count": _INT, "elapsed_seconds": {"type": "number"},
            "error": {"type": ["string", "null"]}}},
        "StationOptions": _always([{"type": "object", "required": ["name", "label", "order"],
                                    "properties": {"name": _STR, "label": _STR, "order": _INT}}], array=True),
        "LossReasons": _always({"type": "object", "required": ["loss_reasons"],
                                "properties": {"loss_reasons": strs}}),
        "FilterOptions": _always({"type": "object", "required": ["pj_types", "packages", "bops", "pj_functions"],
                                  "properties": {k: strs for k in ("pj_types", "packages", "bops",
                                                                   "pj_functions")}},
                                 {"updated_at": _STR, "schema_version": _INT}),
    }


def stage_job_paths(op, json_, ref, job_param: dict) -> dict:
    """The status and result routes of the seed-resolve and lineage jobs (the original's URLs).

    Args:
        op, json_, ref: :mod:`api.openapi`'s operation, JSON-response and ``$ref`` builders.
        job_param(dict): the ``job_id`` path parameter.
    """
    paths = {}
    for route, stage, result, kind in (("seed", "seed-resolve", "SeedResult", SEED_KIND),
                                       ("lineage", "lineage", "LineageResult", LINEAGE_KIND)):
        base = f"/api/trace/{route}/job/{{job_id}}"
        param = {**job_param, "description": f"`{kind}-<24 hex>` (a job of another kind is not found here)"}
        paths[base] = {"get": op(f"Status of a {stage} job, as the dashboard's poller reads it",
                                 {"200": json_(ref("StageStatus"), "the status document")},
                                 ("404", "429", "503"), [param])}
        paths[base + "/result"] = {"get": op(
            f"The {stage} answer of a completed job: the synchronous 200 body, streamed",
            {"200": json_(ref(result), f"what POST /api/trace/{stage} answers synchronously")},
            ("404", "409", "429", "503"), [param])}
    return paths


def _always(data, extra_meta: dict | None = None, array: bool = False) -> dict:
    """An answer that is always the original's envelope (the /api/mid-section-defect/* routes)."""
    return {"type": "object", "required": ["success", "data", "meta"], "properties": {
        "success": {"const": True}, "data": {"type": "array", "items": data[0]} if array else data,
        "meta": {"type": "object", "required": ["timestamp", "app_version", *(extra_meta or {})],
                 "properties": {"timestamp": _STR, "app_version": _STR, **(extra_meta or {})}}}}
