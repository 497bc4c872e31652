"""The trace application's contracts for the job states (:class:`tracebus.jobs.states.JobState`).

Each contract's word for each state is written here and nowhere else in the application:

* ``/api/v1`` and the trace status document (:mod:`tracebus.trace.jobview`), and the ``status``
  of an SSE progress event (``api/sse.py``): :data:`V1_STATUS`, :data:`V1_STAGE`,
  :data:`V1_CODE`. A ``partial`` job is ``completed`` (``code: "EVENTS_PARTIAL_FAILURE"``,
  ``failed_domains`` says what is missing); ``state`` keeps the internal value.
* the dashboard's poller (``GET /api/trace/job/{id}``, :mod:`tracebus.trace.dashview`, and the
  SSE events): :data:`POLLER_STATUS`, :data:`POLLER_CODE`, :func:`poller_progress`. The poller
  stops only on ``completed``/``finished`` or ``failed``, so a cancelled job is ``failed``
  with ``code: "JOB_CANCELLED"``.
* the seed and lineage stage jobs' poll (:mod:`tracebus.trace.stages.jobs`): :data:`STAGE_STATUS`,
  :data:`STAGE_CODE`, :func:`stage_progress`. A stage job is one unit, so a partial one has
  failed.

* a query job (:mod:`tracebus.trace.query.jobs`): :data:`QUERY_STATE`; the web monitor:
  :func:`monitor_words`.

The codes a state gives (:data:`EVENTS_PARTIAL_FAILURE`, and :data:`~tracebus.jobs.states.JOB_CANCELLED`,
:data:`~tracebus.jobs.states.JOB_FAILED` of the job layer) are spelled here and in
:mod:`tracebus.jobs.states` only. Every map covers every state (checked at import and in
tests/test_states.py, which also fails when another module spells a state or a code).
"""

from __future__ import annotations

from tracebus.jobs.states import (ACTIVE_STATES, FINAL_STATES, JOB_CANCELLED, JOB_FAILED, RESULT_STATES,
                                  RETRYABLE_STATES, STATES, JobState, check_covered)

_S = JobState

#: The code of an events job (and of its result, page, stream) some of whose domains failed.
EVENTS_PARTIAL_FAILURE = "EVENTS_PARTIAL_FAILURE"
#: The ``error`` beside :data:`EVENTS_PARTIAL_FAILURE` in a result (the original's words).
PARTIAL_ERROR = "one or more domains failed"

#: ``status`` of the trace status document (/api/v1, SSE progress) for each state.
V1_STATUS: dict[str, str] = {_S.QUEUED: "queued", _S.RUNNING: "running", _S.COMPLETED: "completed",
                             _S.PARTIAL: "completed", _S.FAILED: "failed", _S.CANCELLED: "cancelled"}
#: ``progress.stage`` of the trace status document for each state.
V1_STAGE: dict[str, str] = {_S.QUEUED: "queued", _S.RUNNING: "fetching events", _S.COMPLETED: "complete",
                            _S.PARTIAL: "complete", _S.FAILED: "failed", _S.CANCELLED: "cancelled"}
#: ``code`` of the trace status document, for the states that carry one.
V1_CODE: dict[str, str] = {_S.PARTIAL: EVENTS_PARTIAL_FAILURE}

#: ``status`` the dashboard's poller reads for each state.
POLLER_STATUS: dict[str, str] = {**V1_STATUS, _S.CANCELLED: "failed"}
#: ``code`` the poller reads, for the states that carry one.
POLLER_CODE: dict[str, str] = {**V1_CODE, _S.CANCELLED: JOB_CANCELLED}

#: ``status`` of a seed or lineage stage job's poll for each state.
STAGE_STATUS: dict[str, str] = {_S.QUEUED: "queued", _S.RUNNING: "running", _S.COMPLETED: "completed",
                                _S.PARTIAL: "failed", _S.FAILED: "failed", _S.CANCELLED: "failed"}
#: ``code`` of a stage job's poll, for the states that carry one.
STAGE_CODE: dict[str, str] = {_S.CANCELLED: JOB_CANCELLED}

#: The state a query job (:mod:`tracebus.trace.query.jobs`) shows for each state: its answer
#: is one sorted document, so a job with a failed unit has failed (its answer would miss rows).
QUERY_STATE: dict[str, str] = {**{s: s for s in JobState}, _S.PARTIAL: _S.FAILED}

#: The trace status document's statuses after which a job does not change any more.
V1_FINAL: tuple[str, ...] = tuple(dict.fromkeys(V1_STATUS[s] for s in JobState if s in FINAL_STATES))

for _name, _map in (("V1_STATUS", V1_STATUS), ("V1_STAGE", V1_STAGE), ("POLLER_STATUS", POLLER_STATUS),
                    ("STAGE_STATUS", STAGE_STATUS), ("QUERY_STATE", QUERY_STATE)):
    check_covered(_name, _map)


def poller_progress(state: str, detail: dict) -> str:
    """The original's ``progress`` string of an events job in ``state``: '' while queued,
    'fetching events (settled/total units)', 'complete', or the final state."""
    if state == JobState.QUEUED:
        return ""
    if state == JobState.RUNNING:
        settled = detail["units_done"] + detail["units_failed"]
        return f"fetching events ({settled}/{detail['units_total']} units)"
    return "complete" if state in RESULT_STATES else str(state)


def stage_progress(running: str, state: str) -> str:
    """A stage job's ``progress``: '' while queued, ``running`` (what it does) while running,
    'complete' once completed, else the final state."""
    if state == JobState.QUEUED:
        return ""
    if state == JobState.RUNNING:
        return running
    return "complete" if state == JobState.COMPLETED else str(state)


def stage_failed(state: str) -> bool:
    """Whether a stage job in ``state`` is shown as failed (its one unit did not answer)."""
    return STAGE_STATUS.get(state) == "failed"


def ended_code(state: str) -> str:
    """The code of the ``error`` that ends a stream or a document of a job that ended (in
    ``state``) before its result was whole: :data:`JOB_CANCELLED` or :data:`JOB_FAILED`."""
    return JOB_CANCELLED if state == JobState.CANCELLED else JOB_FAILED


def listed_states(status: str) -> frozenset[str]:
    """The internal states a ``status`` filter of the job list matches: those the trace status
    document shows as ``status`` (so ``completed`` lists partial jobs too), or the state named."""
    return frozenset(s for s in JobState if status in (V1_STATUS[s], s.value))


def monitor_words() -> dict:
    """The states as the web monitor shows them (``GET /api/v1/states``): every state in order,
    the active ones (followed live, can be cancelled), the ones a retry re-runs, the ones with a
    result to show, and the code the dashboard's poller reads beside each state that has one."""
    def ordered(subset) -> list[str]:
        return [s for s in STATES if s in subset]
    return {"states": list(STATES), "active": ordered(ACTIVE_STATES), "retryable": ordered(RETRYABLE_STATES),
            "with_result": ordered(RESULT_STATES), "codes": {str(s): c for s, c in POLLER_CODE.items()}}
