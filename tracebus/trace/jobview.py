"""The trace application's view of its jobs: the contract of ``GET /api/trace/job/{id}``.

Pure rendering on top of the job layer's generic status (:mod:`tracebus.jobs.view`): a
trace job's sections are its domains, its items its CIDs, and its ``app`` fields its
profile and params. The internal state ``partial`` is shown as ``status: "completed"``
with ``code: "EVENTS_PARTIAL_FAILURE"`` and non-empty ``failed_domains``, because the
dashboard's polling client only stops on ``completed``/``finished``/``failed``
(SPEC.md); ``state`` keeps the internal value. A kind adds what is its own on top
(:meth:`tracebus.trace.jobkind.JobKind.render_status`).
"""

from __future__ import annotations

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
        **reused(doc),
    }
    if state in V1_CODE:
        out["code"] = V1_CODE[state]
    return out


def reused(doc: dict) -> dict:
    """Whether the job was answered from a stored result (``reused_from``, ``result_age_s``) or
    asked to run again (``fresh``), from the generic status document."""
    return {k: doc.get(k) for k in ("reused_from", "result_age_s")} | {"fresh": bool(doc.get("fresh"))}


def render_detail(doc: dict, status: dict | None = None) -> dict:
    """A trace job's detail document (``GET /api/v1/jobs/{id}``) from the generic one, on top of
    its status document (``status``, by default :func:`render_status`'s)."""
    out = dict(render_status(doc) if status is None else status)
    out["domain_states"] = [{"domain": s["section"], **_without(s, "section")} for s in doc["section_states"]]
    out["units"] = [{"unit": u["unit"], "domain": u["section"], **_without(u, "unit", "section")}
                    for u in doc["units"]]
    out["params"] = doc.get("app", {}).get("params", {})
    return out


def _without(d: dict, *names: str) -> dict:
    return {k: v for k, v in d.items() if k not in names}
