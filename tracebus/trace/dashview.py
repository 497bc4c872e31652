"""The job status as the dashboard's polling client reads it (``GET /api/trace/job/{id}``).

The dashboard's poller (useAsyncJobPolling.ts) stops only on ``finished``/``completed``
(done) or ``failed`` (throws with ``error``), and shows ``progress`` as a string
(useTraceProgress.ts). So, from the generic status document
(:func:`tracebus.trace.jobview.render_status`):

* ``progress`` is a short string as the original's (``""`` while queued, ``"fetching events
  (3/10 units)"``, ``"complete"``, ``"cancelled"``/``"failed"``), and the structured progress
  moves to ``progress_detail``;
* a cancelled job reports ``status: "failed"``, ``code: "JOB_CANCELLED"`` and an ``error``
  message, so the poller stops at once (``state`` keeps ``cancelled``);
* a partial job already reports ``status: "completed"`` with ``failed_domains`` and
  ``code: "EVENTS_PARTIAL_FAILURE"`` (SPEC.md);
* once completed, ``query_id`` (the job id: the key of its result) and ``trace_query_id``
  (MSD jobs' ``msd-<16 hex>``; ``None`` for other profiles).

``GET /api/v1/jobs[/{id}]`` keeps the generic document (``cancelled``, structured progress).
"""

from __future__ import annotations

from tracebus.jobs.states import CANCELLED_MESSAGE, JobState
from tracebus.trace.states import POLLER_CODE, POLLER_STATUS, poller_progress


#: The original's progress string for a job in internal ``state``.
progress_text = poller_progress


def dashboard_status(doc: dict) -> dict:
    """The dashboard's view of a status document (see the module docstring)."""
    state = doc["state"]
    view = {**doc, "progress": progress_text(state, doc["progress"]), "progress_detail": doc["progress"]}
    if state == JobState.CANCELLED:
        view.update(status=POLLER_STATUS[state], code=POLLER_CODE[state], error=doc.get("error") or CANCELLED_MESSAGE)
    if view["status"] == POLLER_STATUS[JobState.COMPLETED]:
        view.update(query_id=doc["job_id"], trace_query_id=doc.get("trace_query_id"))
    else:
        view.pop("trace_query_id", None)
    return view


def dashboard_progress(data: dict) -> dict:
    """An SSE progress event's data with the same ``status``/``code`` mapping."""
    state = data.get("state")
    if state == JobState.CANCELLED:
        return {**data, "status": POLLER_STATUS[state], "code": POLLER_CODE[state]}
    if state in POLLER_CODE:
        return {**data, "code": POLLER_CODE[state]}
    return data
