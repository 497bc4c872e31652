"""The job layer's state vocabulary, and its mapping to the job layer's public contracts.

:class:`JobState` is every state a job hash's ``status`` holds, :class:`UnitState` every
state a unit (and a section) holds; both are ``str`` enums, so what is stored in Redis and
written as JSON is the plain word. The Lua scripts in ``tracebus/jobs/lua`` spell the same
words (tests/test_states.py keeps them members). The generic ``/api/job`` contract's words
for each state are here and nowhere else (:data:`PUBLIC_STATUS`), and so are the public codes
a job's state gives (:data:`JOB_CANCELLED`, :data:`JOB_FAILED`, :data:`PARTIAL_FAILURE`); the
trace application's contracts map the same enum in :mod:`tracebus.trace.states`. No other
module spells a state or one of these codes (tests/test_states.py scans them).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """A job's internal state, in the order the status zsets are passed to the job scripts."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"  # every unit settled, some failed: the result lacks those sections
    FAILED = "failed"
    CANCELLED = "cancelled"


class UnitState(StrEnum):
    """A unit's state (a section's is derived from its units' states)."""

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Every job state as a plain string, in :class:`JobState` order (status zset order).
STATES: tuple[str, ...] = tuple(s.value for s in JobState)
#: Job states in which units still run (or wait to).
ACTIVE_STATES = frozenset({JobState.QUEUED, JobState.RUNNING})
#: Job states after which nothing runs any more.
FINAL_STATES = frozenset(set(JobState) - ACTIVE_STATES)
#: Job states whose result can be read (a partial result lacks its failed sections).
RESULT_STATES = frozenset({JobState.COMPLETED, JobState.PARTIAL})
#: Job states a retry re-runs (job_retry.lua refuses the others): the failed and cancelled units of these.
RETRYABLE_STATES = frozenset({JobState.PARTIAL, JobState.FAILED, JobState.CANCELLED})
#: Unit states after which a unit will not run again (until its job is retried).
DEAD_UNIT_STATES = frozenset({UnitState.FAILED, UnitState.CANCELLED})

#: The public code of a cancelled job, in every contract that gives one.
JOB_CANCELLED = "JOB_CANCELLED"
#: The public code of a job that failed before its result was whole (a stream's ``error`` line).
JOB_FAILED = "JOB_FAILED"
#: The generic contract's code of a job some of whose sections failed.
PARTIAL_FAILURE = "PARTIAL_FAILURE"
#: The ``error`` of a cancelled job that carries none of its own.
CANCELLED_MESSAGE = "job was cancelled"

# The generic /api/job contract (tracebus.jobs.contract): the poller stops on completed and
# failed, so a partial job has completed and a cancelled one has failed.
#: ``status`` of each job state.
PUBLIC_STATUS: dict[str, str] = {
    JobState.QUEUED: "queued", JobState.RUNNING: "running", JobState.COMPLETED: "completed",
    JobState.PARTIAL: "completed", JobState.FAILED: "failed", JobState.CANCELLED: "failed",
}
#: ``code`` of the job states that carry one.
PUBLIC_CODE: dict[str, str] = {JobState.CANCELLED: JOB_CANCELLED, JobState.PARTIAL: PARTIAL_FAILURE}


def public_progress(state: str, settled: int, total: int) -> str:
    """The generic contract's ``progress`` words of a job in ``state``: '' while queued,
    'running (settled/total units)', 'complete', or the final state."""
    if state == JobState.QUEUED:
        return ""
    if state == JobState.RUNNING:
        return f"running ({settled}/{total} units)"
    return "complete" if state in RESULT_STATES else str(state)


def words(mapping: dict[str, str]) -> list[str]:
    """A contract's distinct words in state order (its OpenAPI ``enum``)."""
    return list(dict.fromkeys(mapping.values()))


def check_covered(name: str, mapping: dict, states: type[StrEnum] = JobState) -> None:
    """Raise when ``mapping`` does not give every member of ``states`` its word (at import,
    so a new state cannot ship without its place in each contract)."""
    if set(mapping) != set(states):
        raise AssertionError(f"{name} covers {sorted(mapping)}, the states are {sorted(states)}")


check_covered("PUBLIC_STATUS", PUBLIC_STATUS)
