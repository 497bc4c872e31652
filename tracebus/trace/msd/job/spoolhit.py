"""The MSD "spool hit": a request whose analysis is already stored is answered at once.

MSD.md section 5: the original recomputes the ``trace_query_id`` of an MSD events request
and, when that query's stored result is still there, answers 200 ``{stage: "events",
spool_hit: true, trace_query_id, aggregation, results: {}}`` instead of starting a job.
Here the stored result is the last completed MSD job of that ``trace_query_id``. Its
aggregation was computed with the job's population and loss-reason masks, which the
``trace_query_id`` leaves out, so it is reused only when the request asks for the same
masks; otherwise (and when the job is gone, running, failed, or another named user's) the
request becomes a job as usual.
"""

from __future__ import annotations

from tracebus.jobs.errors import JobError
from tracebus.trace import owners
from tracebus.trace.errors import CacheExpired
from tracebus.trace.msd import MsdParams
from tracebus.trace.msd.job.detailstore import DetailStore
from tracebus.trace.msd.job.plan import MsdRequest, unpack


def _masks(params: MsdParams) -> tuple:
    return (params.direction, params.loss_reasons, params.pj_types, params.packages)


def answer(store, req: MsdRequest) -> dict | None:
    """The 200 body of a spool hit for ``req``, or None when it must run as a job."""
    try:
        job_id, app = DetailStore(store).job_of(req.trace_query_id, req.user)
        doc = store.status(job_id)
    except (CacheExpired, JobError):
        return None
    if not owners.may_access(doc["user"], req.user):
        return None
    if _masks(MsdParams.from_params(app.get("params") or {})) != _masks(req.params):
        return None
    aggregation = unpack(store.get_artifact(job_id, "aggregation"))
    if aggregation is None:
        return None
    return {"stage": "events", "spool_hit": True, "trace_query_id": req.trace_query_id,
            "query_id": job_id, "aggregation": aggregation, "results": {}}
