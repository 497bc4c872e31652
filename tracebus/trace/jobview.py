"""The trace application's view of its jobs: the contract of ``GET /api/trace/job/{id}``.

Pure rendering on top of the job layer's generic status (:mod:`tracebus.jobs.view`): a
trace job's sections are its domains, its items its CIDs, and its ``app`` fields its
profile and params. The internal state ``partial`` is shown as ``status: "completed"``
with ``code: "EVENTS_PARTIAL_FAILURE"`` and non-empty ``failed_domains``, because the
dashboard's polling client only stops on ``completed``/``finished``/``failed``
(SPEC.md); ``state`` keeps the internal value.
"""

from __future__ import annotations

from tracebus.jobs.states import JobState
from tracebus.trace.states import V1_CODE, V1_STAGE, V1_STATUS


def render_status(doc: dict) -> dict:
    """A trace job's status document from the generic one."""
    state = doc["status"]
    app = doc.get("app", {})
    out = {
        "job_id": doc["job_id"], "status": V1_STATUS.get(state, state),
        "state": state, "profile": app.get("profile"), "user": doc["user"],
        "cid_count": doc["items"], "domains": doc["sections"],
        "progress": {**doc["progress"], "stage": V1_STAGE.get(state, state)},
        "created_at": doc["created_at"], "started_at": doc["started_at"],
        "finished_at": doc["finished_at"], "elapsed_seconds": doc["elapsed_seconds"],
        "estimated_remaining_seconds": doc["estimated_remaining_seconds"],
        "error": doc["error"], "failed_domains": doc["failed_sections"],
    }
    if state in V1_CODE:
        out["code"] = V1_CODE[state]
    if app.get("msd"):
        _msd_view(out, app["msd"])
    return out


#: Sections of an MSD job that are not event domains (see tracebus.trace.msd.job).
_MSD_INTERNAL = ("detection", "context", "detail", "finalize")


def _msd_view(out: dict, msd: dict) -> None:
    """An MSD job shows its event domains and seed count; a failed internal section (detection,
    contexts, detail, the reduce) fails the job, as an aggregation error does in the original."""
    failed = list(out["failed_domains"])
    out.update(domains=list(msd["domains"]), cid_count=msd["seed_count"], trace_query_id=msd["trace_query_id"],
               failed_domains=[d for d in failed if d in msd["domains"]])
    broken = [s for s in failed if s in _MSD_INTERNAL]
    if broken:
        out.update(status=V1_STATUS[JobState.FAILED], state=JobState.FAILED.value,
                   error=out.get("error") or f"MSD aggregation failed ({', '.join(broken)} units failed)")
        out.pop("code", None)
    elif not out["failed_domains"]:
        out.pop("code", None)


def render_detail(doc: dict) -> dict:
    """A trace job's detail document (``GET /api/v1/jobs/{id}``) from the generic one."""
    out = render_status(doc)
    out["domain_states"] = [{"domain": s["section"], **_without(s, "section")} for s in doc["section_states"]]
    out["units"] = [{"unit": u["unit"], "domain": u["section"], **_without(u, "unit", "section")}
                    for u in doc["units"]]
    out["params"] = doc.get("app", {}).get("params", {})
    return out


def _without(d: dict, *names: str) -> dict:
    return {k: v for k, v in d.items() if k not in names}
