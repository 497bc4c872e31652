"""Settings of the generic job layer: TTLs, time limits, quotas and in-flight caps.

The variables keep the names of the original dashboard (``TRACE_JOB_TTL_SECONDS``, ...):
the trace application was the first job kind, and users already set them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracebus.config import setting
from tracebus.engine.settings import Settings


@dataclass(frozen=True)
class JobSettings(Settings):
    """Tunables of every job kind. Units are in the names."""

    job_ttl_s: int = setting("TRACE_JOB_TTL_SECONDS", 3600, minimum=1,
                             doc="Every key of a job expires this long after its last write.")
    job_timeout_s: int = setting("TRACE_JOB_TIMEOUT_SECONDS", 1800, minimum=1,
                                 doc="Time limit of one job.")
    job_max_inflight_units: int = setting("TRACE_JOB_MAX_INFLIGHT_UNITS", 2, minimum=1,
                                          doc="Units of one job queued or running at once.")
    user_max_inflight_units: int = setting(
        "TRACE_USER_MAX_INFLIGHT_UNITS", 0, minimum=0,
        doc="Units of all one user's jobs on one queue queued or running at once, so that one user's "
            "backlog never holds the queue from others' jobs (a free place goes to the user's job "
            "holding fewest, then the oldest); 0 (default): TRACE_JOB_MAX_INFLIGHT_UNITS.")
    user_max_inflight: int = setting("TRACE_USER_MAX_INFLIGHT", 5, minimum=1,
                                     doc="Queued or running jobs per user (429 above it).")
    user_max_bytes: int = setting("TRACE_USER_MAX_BYTES", 256 << 20, minimum=0,
                                  doc="Bytes of Redis one user's jobs and answers may hold at once (their "
                                      "stored params and inputs, result chunks and their columnar copies, "
                                      "partials, artifacts, stage and lineage answers), counted until "
                                      "they expire: past it a submit is 429 BUDGET_EXCEEDED and a running "
                                      "job fails with that reason (0: no budget).")
    sweep_s: int = setting("TRACE_JOB_SWEEP_SECONDS", 15, minimum=1,
                           doc="How often a supervisor sweeps for stranded and timed-out jobs "
                               "(one supervisor at a time).")
    sweep_grace_s: int = setting("TRACE_JOB_SWEEP_GRACE_SECONDS", 60, minimum=1,
                                 doc="A job idle this long (no progress event) whose queued or running "
                                     "units have no message is stranded: the sweeper re-sends them.")
    columnar_copy: int = setting("TRACEBUS_COLUMNAR_COPY", 0, minimum=0,
                                 doc="1: a worker with pyarrow stores a Parquet copy of each result chunk "
                                     "whose columns all have a type (fast Parquet and Arrow exports, at "
                                     "pyarrow's memory in every worker); 0 (default): never.")
    result_reuse_max_age_s: int = setting(
        "TRACE_RESULT_REUSE_MAX_AGE_S", -1, minimum=-1,
        doc="An identical request is answered from a completed result younger than this "
            "(a job of its own, no query run); -1 (default): the job TTL; 0: never.")
    stream_batch_rows: int = setting("TRACE_STREAM_BATCH_SIZE", 5000, minimum=1,
                                     doc="Rows per stored result chunk.")

    @property
    def reuse_max_age_s(self) -> int:
        """``TRACE_RESULT_REUSE_MAX_AGE_S`` in effect (-1 means the job TTL; 0: reuse is off)."""
        return self.job_ttl_s if self.result_reuse_max_age_s < 0 else self.result_reuse_max_age_s
