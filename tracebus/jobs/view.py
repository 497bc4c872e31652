"""The generic view of a job: status, per-section and per-unit states (pure rendering).

The functions turn the raw job hash and unit states read by
:class:`tracebus.jobs.store.JobStore` into plain dicts that every job kind shares
(``GET /api/v1/jobs[/{id}]``); an application renders its own contract on top of them
(the trace application's is :mod:`tracebus.trace.jobview`). ``status`` is the internal
state; ``app`` holds the fields the job's kind stored at submit.
"""

from __future__ import annotations

import json

from tracebus.jobs.states import FINAL_STATES, STATES, UnitState  # noqa: F401 (STATES, FINAL_STATES re-exported)
from tracebus.jobs.units import UnitPlan


#: Fields of a job hash that are the job's own when it is answered from another job's result or
#: joins another job in flight (:mod:`tracebus.jobs.reuse`): never taken from that job.
OWN_FIELDS = ("job_id", "user", "created_ms", "started_ms", "finished_ms", "retried_ms", "fingerprint",
              "result_key", "fresh", "data_of", "reused_from", "result_ms", "inflight", "joined")


def decode_hash(raw: dict) -> dict[str, str]:
    """A job hash as read by redis-py (bytes) with str keys and values."""
    return {k.decode(): v.decode() for k, v in raw.items()}


def plan_of(job: dict[str, str]) -> UnitPlan:
    """The unit plan recorded in a job hash."""
    return UnitPlan(tuple(json.loads(job["sections"])), int(job["items"]), int(job["chunk_items"]))


def failed_sections(job: dict[str, str]) -> list[str]:
    """Sections with at least one failed unit, in request order."""
    sections = json.loads(job["sections"])
    return [d for i, d in enumerate(sections) if int(job.get(f"sfail:{i}", "0")) > 0]


def _seconds(job: dict[str, str], field: str) -> float | None:
    value = job.get(field)
    return int(value) / 1000.0 if value else None


def render_status(job: dict[str, str], now_s: float) -> dict:
    """The generic status document of one job.

    Args:
        job(dict[str, str]): the decoded job hash.
        now_s(float): the current epoch time in seconds.

    Returns:
        dict: job_id, kind, actor (of its units), status (the internal state), user, sections, items, progress
        (units done / failed / total, rows), timestamps, elapsed and estimated remaining
        seconds, error, failed_sections, ``app`` (the kind's own fields), and
        :func:`reuse_fields`.
    """
    state = job["status"]
    created, started, finished = (_seconds(job, f) for f in ("created_ms", "started_ms", "finished_ms"))
    done, failed = int(job["units_done"]), int(job["units_failed"])
    total = int(job["units_total"])
    return {
        "job_id": job["job_id"], "kind": job.get("kind", ""), "actor": job.get("actor", ""),
        "status": state, "user": job["user"],
        "sections": json.loads(job["sections"]), "items": int(job["items"]),
        "progress": {"units_done": done, "units_failed": failed, "units_total": total,
                     "rows": int(job["rows"])},
        "created_at": created, "started_at": started, "finished_at": finished,
        "elapsed_seconds": round((finished or now_s) - created, 3),
        "estimated_remaining_seconds": _remaining(state, started, done + failed, total, now_s),
        "error": job.get("error") or None, "failed_sections": failed_sections(job),
        "app": json.loads(job.get("app") or "{}"),
        **reuse_fields(job, now_s),
    }


def reuse_fields(job: dict[str, str], now_s: float) -> dict:
    """``reused_from`` (the id of the stored result the job was answered from, else None: never
    the id of the job that ran it), ``result_age_s`` (seconds since that result completed) and
    ``fresh`` (the request asked to run again, ``Cache-Control: no-cache``)."""
    result_ms = job.get("result_ms")
    return {"reused_from": job.get("reused_from") or None,
            "result_age_s": round(max(0.0, now_s - int(result_ms) / 1000), 1) if result_ms else None,
            "fresh": job.get("fresh") == "1"}


def _remaining(state: str, started: float | None, settled: int, total: int, now_s: float) -> float | None:
    if state in FINAL_STATES:
        return 0.0
    if started is None or settled == 0:
        return None
    rate = settled / max(now_s - started, 1e-3)
    return round((total - settled) / rate, 1)


def render_units(plan: UnitPlan, units: dict[int, dict]) -> tuple[list[dict], list[dict]]:
    """Per-section and per-unit states for the detail view.

    Args:
        plan(UnitPlan): the job's unit plan.
        units(dict[int, dict]): unit index -> decoded unit state.

    Returns:
        tuple[list[dict], list[dict]]: the section summaries and the unit rows.
    """
    unit_rows = []
    for u in range(plan.total):
        st = units.get(u, {})
        unit_rows.append({
            "unit": u, "section": plan.section_of(u), "chunk": plan.chunk_of(u),
            "state": st.get("state", UnitState.PENDING.value), "attempt": st.get("attempt", 0),
            "rows": st.get("rows", 0), "error": st.get("error"),
            "started_at": st["started_ms"] / 1000.0 if st.get("started_ms") else None,
            "finished_at": st["finished_ms"] / 1000.0 if st.get("finished_ms") else None,
        })
    sections = []
    for section in plan.sections:
        mine = [unit_rows[u] for u in plan.units_of(section)]
        counts = {s.value: sum(1 for r in mine if r["state"] == s) for s in UnitState}
        sections.append({"section": section, "state": _section_state(counts, len(mine)),
                        "units_total": len(mine), "units": counts,
                        "rows": sum(r["rows"] for r in mine if r["state"] == UnitState.DONE)})
    return sections, unit_rows


def _section_state(counts: dict[str, int], total: int) -> str:
    if counts[UnitState.FAILED]:
        return UnitState.FAILED.value
    if counts[UnitState.DONE] == total:
        return UnitState.DONE.value
    for state in (UnitState.RUNNING, UnitState.QUEUED, UnitState.CANCELLED):
        if counts[state]:
            return state.value
    return (UnitState.RUNNING if counts[UnitState.DONE] else UnitState.PENDING).value
