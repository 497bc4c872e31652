"""The stage kind's HTTP side: its routes, their rate limits, their OpenAPI documents.

``POST /api/trace/seed-resolve`` and ``POST /api/trace/lineage`` are answered now or admitted as
a one-unit job (:class:`SeedResolve`, :class:`Lineage`: :mod:`.answers` checks and answers,
:mod:`.jobs` decides and admits); ``GET /api/trace/{seed,lineage}/job/{job_id}[/result]`` are
their jobs' status and answer, with the original's URLs (routes/trace_routes.py). The API serves,
limits and documents them from :func:`routes` and :func:`schemas` (the kind's
:meth:`~tracebus.trace.jobkind.JobKind.routes`), in the original's envelope like the other
``/api/trace/*`` routes unless ``TRACEBUS_API_DASHBOARD_ENVELOPE=0``.
"""

from __future__ import annotations

import functools

from tracebus.jobs.states import JOB_CANCELLED, words
from tracebus.trace.kinds import COMPACT, lineage_profiles
from tracebus.trace.now_or_job import NowOrJob
from tracebus.trace.routes import Doc, Env, Route, ref
from tracebus.trace.stages.answers import MsdStages
from tracebus.trace.stages.jobs import LINEAGE_KIND, ROUTES, SEED_KIND, STAGES, StageJobs
from tracebus.trace.stages.params import LINEAGE_REQUEST, SEED_REQUEST, LineageRequest, SeedRequest
from tracebus.trace.states import STAGE_STATUS

_OBJ, _STR, _INT = {"type": "object"}, {"type": "string"}, {"type": "integer"}
#: What the lineage answers, by the shape a profile's kind declares (:attr:`~tracebus.trace.jobkind.JobKind.profile_lineage`).
_LINEAGE_SHAPES = {
    COMPACT: "the compact answer (ids, counts, seed_roots)",
    "forward": "the original's forward tree (roots, children_map, leaf_serials, names, nodes, edges)",
    "backward": "its reverse tree (roots = the seeds, ancestors, parent_map, merge_edges, names, nodes, edges, "
                "seed_roots)",
}


class _Stage(NowOrJob):
    """A stage request: answered now (200), or a one-unit job above its threshold (202)."""

    def __init__(self, env: Env):
        self.stages = MsdStages(env.settings, env.store.redis, env.source_factory, run=env.run)
        self.jobs, self.dispatcher = StageJobs(env.settings, env.store.redis), env.dispatcher


class SeedResolve(_Stage):
    """The seed-resolve stage."""

    what = "seed-resolve answer"

    def check(self, body, user: str) -> SeedRequest:
        return self.stages.check_seed(body)

    def is_async(self, request: SeedRequest) -> bool:
        return self.jobs.seed_is_async(request)

    def now(self, request: SeedRequest, user: str) -> dict:
        return self.stages.run_seed(request, user)

    def submit(self, request: SeedRequest, user: str, fresh: bool) -> dict:
        return self.jobs.submit_seed(request, user, self.dispatcher, fresh=fresh)


class Lineage(_Stage):
    """The lineage stage (its answer is kept under its ``query_id`` for the events stage)."""

    what = "lineage answer"

    def check(self, body, user: str) -> LineageRequest:
        return self.stages.check_lineage(body)

    def is_async(self, request: LineageRequest) -> bool:
        return self.jobs.lineage_is_async(request)

    def now(self, request: LineageRequest, user: str) -> dict:
        return self.stages.run_lineage(request, user)

    def submit(self, request: LineageRequest, user: str, fresh: bool) -> dict:
        return self.jobs.submit_lineage(request, user, self.dispatcher, fresh=fresh)


def _job_read(read: str, kind: str, env: Env):
    """``(job_id, user) ->`` the status or the answer of a stage job of ``kind``."""
    return functools.partial(getattr(StageJobs(env.settings, env.store.redis), read), kind)


def _seed_doc(settings) -> Doc:
    return Doc("MSD seeds of a date range or of typed container values (the original's answer)",
               {"200": (ref("SeedResult"), "the seeds; a date range without seeds has seed_count 0"),
                "202": (ref("StageAccepted"), f"date mode over more than {settings.seed_async_days} days "
                                              "(TRACE_SEED_ASYNC_DAYS): a job")},
               ("400", "404", "413", "429", "503", "507"), body=ref("SeedRequest"))


def _lineage_doc(settings) -> Doc:
    return Doc("Lineage of seed lots, backward or forward; kept under `query_id` for the events stage "
               "(its `lineage_query_id`) for TRACE_JOB_TTL_SECONDS",
               {"200": (ref("LineageResult"), f"the lineage (compact for {' and '.join(lineage_profiles(COMPACT))})"),
                "202": (ref("StageAccepted"), f"more than {settings.async_cid_threshold} seeds "
                                              "(TRACE_ASYNC_CID_THRESHOLD): a job")},
               ("400", "413", "429", "503", "507"), body=ref("LineageRequest"))


def _status_doc(kind: str, settings) -> Doc:
    return Doc(f"Status of a {STAGES[kind]} job, as the dashboard's poller reads it",
               {"200": (ref("StageStatus"), "the status document")}, ("404", "429", "503"),
               job_id=f"`{kind}-<24 hex>` (a job of another kind is not found here)")


def _result_doc(kind: str, result: str, settings) -> Doc:
    stage = STAGES[kind]
    return Doc(f"The {stage} answer of a completed job: the synchronous 200 body, streamed",
               {"200": (ref(result), f"what POST /api/trace/{stage} answers synchronously")},
               ("404", "409", "429", "503"), job_id=f"`{kind}-<24 hex>` (a job of another kind is not found here)")


def routes() -> tuple[Route, ...]:
    """The stages' routes (the original's paths and rate-limit buckets: core/rate_limit.py)."""
    out = [Route("/api/trace/seed-resolve", "now-or-job", SeedResolve, _seed_doc, "stages", "trace-seed", (10, 60)),
           Route("/api/trace/lineage", "now-or-job", Lineage, _lineage_doc, "stages", "trace-lineage", (10, 60))]
    for kind, result in ((SEED_KIND, "SeedResult"), (LINEAGE_KIND, "LineageResult")):
        base = f"/api/trace/{ROUTES[kind]}/job/{{job_id}}"
        # A job's status and result share the API's trace-job-status bucket, as in the original.
        out += [Route(base, "job-status", functools.partial(_job_read, "status", kind),
                      functools.partial(_status_doc, kind), "stages", "trace-job-status"),
                Route(base + "/result", "job-result", functools.partial(_job_read, "result", kind),
                      functools.partial(_result_doc, kind, result), "stages", "trace-job-status")]
    return tuple(out)


def schemas(settings) -> dict[str, dict]:
    """The schemas of the stages' requests (derived from their declarations,
    :mod:`.params`), answers (:mod:`.answers`), and jobs' 202 answers and status (:mod:`.jobs`)."""
    strs = {"type": "array", "items": _STR}
    limits = {"cid_limit": settings.events_cid_limit}
    stage_names = list(STAGES.values())
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
            "description": "; ".join(f"{profile}: {_LINEAGE_SHAPES[shape]}" for shape in _LINEAGE_SHAPES
                                     for profile in lineage_profiles(shape))},
        "StageAccepted": {"type": "object", "required": ["stage", "async", "job_id", "status_url", "query_id"],
                          "description": "the stage runs as a job: poll `status_url` until `status` is "
                                         "completed or failed, then GET `result_url` (`status_url` + /result)",
                          "properties": {
            "stage": {"type": "string", "enum": stage_names}, "async": {"const": True},
            "job_id": _STR, "status_url": _STR, "result_url": _STR, "query_id": _STR,
            "cache_key": _STR, "cid_count": _INT}},
        "StageStatus": {"type": "object", "required": ["job_id", "stage", "status", "state", "progress"],
                        "properties": {
            "job_id": _STR, "stage": {"type": "string", "enum": stage_names},
            "status": {"type": "string", "enum": words(STAGE_STATUS),
                       "description": "the poller stops on completed and failed (a cancelled job, or one "
                                      "whose unit failed, is failed with `error`; `state` keeps the internal one)"},
            "state": _STR, "code": {"const": JOB_CANCELLED},
            "progress": {"type": "string", "description": "'' (queued), 'resolving seeds' / 'tracing "
                                                          "lineage', 'complete', 'failed', 'cancelled'"},
            "progress_detail": _OBJ, "query_id": {"type": ["string", "null"]}, "profile": _STR,
            "user": _STR, "cid_count": _INT, "elapsed_seconds": {"type": "number"},
            "error": {"type": ["string", "null"]}}},
    }

