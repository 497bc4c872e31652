"""What the HTTP API shows of a job: status, detail and list entries (pure rendering).

The functions turn the raw job hash and unit states read by
:class:`tracebus.trace.jobstore.JobStore` into the dicts of ``GET /api/trace/job/{id}``
and ``GET /api/v1/jobs[/{id}]``. The internal state ``partial`` is shown as
``status: "completed"`` with ``code: "EVENTS_PARTIAL_FAILURE"`` and non-empty
``failed_domains``, because the dashboard's polling client only stops on
``completed``/``finished``/``failed`` (SPEC.md); ``state`` keeps the internal value.
"""

from __future__ import annotations

import json

from .units import UnitPlan

#: Every internal state, in the order the status zsets are passed to the job scripts.
STATES = ("queued", "running", "completed", "partial", "failed", "cancelled")
#: Internal states after which nothing runs any more.
FINAL_STATES = frozenset({"completed", "partial", "failed", "cancelled"})

_STAGES = {"queued": "queued", "running": "fetching events", "completed": "complete",
           "partial": "complete", "failed": "failed", "cancelled": "cancelled"}


def decode_hash(raw: dict) -> dict[str, str]:
    """A job hash as read by redis-py (bytes) with str keys and values."""
    return {k.decode(): v.decode() for k, v in raw.items()}


def plan_of(job: dict[str, str]) -> UnitPlan:
    """The unit plan recorded in a job hash."""
    return UnitPlan(tuple(json.loads(job["domains"])), int(job["cid_count"]), int(job["chunk_cids"]))


def failed_domains(job: dict[str, str]) -> list[str]:
    """Domains with at least one failed unit, in request order."""
    domains = json.loads(job["domains"])
    return [d for i, d in enumerate(domains) if int(job.get(f"dfail:{i}", "0")) > 0]


def _seconds(job: dict[str, str], field: str) -> float | None:
    value = job.get(field)
    return int(value) / 1000.0 if value else None


def render_status(job: dict[str, str], now_s: float) -> dict:
    """The status document of one job.

    Args:
        job(dict[str, str]): the decoded job hash.
        now_s(float): the current epoch time in seconds.

    Returns:
        dict: job_id, status, state, profile, cid_count, domains, progress, timestamps,
        elapsed and estimated remaining seconds, error, failed_domains (and ``code`` when
        partial).
    """
    state = job["status"]
    created, started, finished = (_seconds(job, f) for f in ("created_ms", "started_ms", "finished_ms"))
    done, failed = int(job["units_done"]), int(job["units_failed"])
    total = int(job["units_total"])
    failed_list = failed_domains(job)
    doc = {
        "job_id": job["job_id"], "status": "completed" if state == "partial" else state,
        "state": state, "profile": job["profile"], "user": job["user"],
        "cid_count": int(job["cid_count"]), "domains": json.loads(job["domains"]),
        "progress": {"units_done": done, "units_failed": failed, "units_total": total,
                     "rows": int(job["rows"]), "stage": _STAGES.get(state, state)},
        "created_at": created, "started_at": started, "finished_at": finished,
        "elapsed_seconds": round((finished or now_s) - created, 3),
        "estimated_remaining_seconds": _remaining(state, started, done + failed, total, now_s),
        "error": job.get("error") or None, "failed_domains": failed_list,
    }
    if state == "partial":
        doc["code"] = "EVENTS_PARTIAL_FAILURE"
    return doc


def _remaining(state: str, started: float | None, settled: int, total: int, now_s: float) -> float | None:
    if state in FINAL_STATES:
        return 0.0
    if started is None or settled == 0:
        return None
    rate = settled / max(now_s - started, 1e-3)
    return round((total - settled) / rate, 1)


def render_units(plan: UnitPlan, units: dict[int, dict]) -> tuple[list[dict], list[dict]]:
    """Per-domain and per-unit states for the detail view.

    Args:
        plan(UnitPlan): the job's unit plan.
        units(dict[int, dict]): unit index -> decoded unit state.

    Returns:
        tuple[list[dict], list[dict]]: the domain summaries and the unit rows.
    """
    unit_rows = []
    for u in range(plan.total):
        st = units.get(u, {})
        unit_rows.append({
            "unit": u, "domain": plan.domain_of(u), "chunk": plan.chunk_of(u),
            "state": st.get("state", "pending"), "attempt": st.get("attempt", 0),
            "rows": st.get("rows", 0), "error": st.get("error"),
            "started_at": st["started_ms"] / 1000.0 if st.get("started_ms") else None,
            "finished_at": st["finished_ms"] / 1000.0 if st.get("finished_ms") else None,
        })
    domains = []
    for domain in plan.domains:
        mine = [unit_rows[u] for u in plan.units_of(domain)]
        counts = {s: sum(1 for r in mine if r["state"] == s)
                  for s in ("pending", "queued", "running", "done", "failed", "cancelled")}
        domains.append({"domain": domain, "state": _domain_state(counts, len(mine)),
                        "units_total": len(mine), "units": counts,
                        "rows": sum(r["rows"] for r in mine if r["state"] == "done")})
    return domains, unit_rows


def _domain_state(counts: dict[str, int], total: int) -> str:
    if counts["failed"]:
        return "failed"
    if counts["done"] == total:
        return "done"
    for state in ("running", "queued", "cancelled"):
        if counts[state]:
            return state
    return "running" if counts["done"] else "pending"
