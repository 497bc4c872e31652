"""Errors of the job layer: unknown or unfinished jobs, quotas, fenced attempts."""

from __future__ import annotations

from tracebus.errors import TracebusError


class JobError(TracebusError):
    """Base class of the job layer's errors."""


class QuotaExceeded(JobError):
    """The user already has the maximum number of queued or running jobs.

    Attributes:
        retry_after_s(int): when the client may try again.
    """

    code = "QUOTA_EXCEEDED"

    def __init__(self, message: str, retry_after_s: int = 30, **details):
        super().__init__(message, **details)
        self.retry_after_s = retry_after_s


class BudgetExceeded(QuotaExceeded):
    """What the user's jobs and answers hold in Redis would pass ``TRACE_USER_MAX_BYTES``
    (:mod:`tracebus.jobs.budget`). Permanent for the job that meets it: it fails, not retried."""

    code = "BUDGET_EXCEEDED"
    retryable = False


class JobNotFound(JobError):
    """No job with that id exists (or it belongs to another user)."""

    code = "JOB_NOT_FOUND"


class JobNotComplete(JobError):
    """The job's result was asked for before the job finished."""

    code = "JOB_NOT_COMPLETE"


class JobResultExpired(JobError):
    """The job existed but its result keys have expired."""

    code = "JOB_RESULT_EXPIRED"


class JobStateConflict(JobError):
    """The job is in a state that does not allow the action (cancel a finished job, ...)."""

    code = "JOB_STATE_CONFLICT"


class JobAlreadyTerminal(JobStateConflict):
    """The job ended (completed or failed) before it could be abandoned (the original's 409)."""

    code = "JOB_ALREADY_TERMINAL"


class StaleAttempt(JobError):
    """A unit attempt was fenced off: a newer attempt of the same unit owns the result."""

    code = "STALE_ATTEMPT"


class FollowTimeout(JobError):
    """A result followed while its job runs did not end within the follow deadline."""

    code = "FOLLOW_TIMEOUT"
