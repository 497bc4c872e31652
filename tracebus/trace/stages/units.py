"""The stage-unit handler: what a worker runs for a seed-resolve or lineage job (one unit each).

The job (:mod:`tracebus.trace.stages.jobs`) was admitted after the request passed
:meth:`~tracebus.trace.stages.answers.MsdStages.check_seed` / ``check_lineage``; the unit checks it
again from the job's own fields (the same code, so the same answer) and runs the stage with
:class:`~tracebus.trace.stages.answers.MsdStages`, exactly as the synchronous path does: the
lineage goes to the LineageCache under its ``lin-`` query id, and the answer the synchronous
route would have sent is stored as JSON in the job's artifact ``answer`` (with the job TTL)
before the unit settles, so a completed job always has it. Memory: the stage's (a 68K-seed
backward lineage is a few hundred MB), in a worker that the supervisor recycles, not in
gunicorn.

The stage kind (:mod:`.kind`) runs :func:`run_unit` for each unit of its jobs.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import orjson

from tracebus.engine.actor import get_broker
from tracebus.engine.worker import heartbeat
from tracebus.errors import InvalidParams
from tracebus.trace.errors import CidLimitExceeded, NoDetectionRecords, TraceError
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.stages.answers import MsdStages
from tracebus.trace.stages.jobs import ANSWER, STAGES, SEED_KIND, LINEAGE_KIND
from tracebus.trace.ticker import ticking

log = logging.getLogger(__name__)

#: Seconds between heartbeats while the stage runs (well under TRACEBUS_HEARTBEAT_TIMEOUT_SECONDS).
BEAT_EVERY_S = 10.0


class StageRejected(TraceError):
    """The stored request does not pass the stage's check in the worker (its settings differ from
    the API's, or the job was forged): permanent, so the unit fails at once instead of retrying."""

    code = "STAGE_REJECTED"
    retryable = False


def run_stage(stages: MsdStages, ctx: TraceUnit) -> dict:
    """The answer of the stage job ``ctx`` belongs to (the synchronous route's 200 body).

    Raises:
        StageRejected: the stored request is not valid (not retried).
        SourceError: the source failed (retried when transient).
    """
    try:
        return _run(stages, ctx)
    except (InvalidParams, NoDetectionRecords, CidLimitExceeded) as e:
        raise StageRejected(f"{type(e).__name__}: {e}") from e


def _run(stages: MsdStages, ctx: TraceUnit) -> dict:
    app = ctx.app
    if ctx.section == STAGES[SEED_KIND]:
        return stages.run_seed(stages.check_seed({"profile": app["profile"], "params": app["params"]}))
    if ctx.section == STAGES[LINEAGE_KIND]:
        body = {"profile": app["profile"], "container_ids": list(ctx.input), "params": app["params"]}
        return stages.run_lineage(stages.check_lineage(body), ctx.store.user_of(ctx.job_id))
    raise ValueError(f"job {ctx.job_id}: no stage {ctx.section!r}")


@contextmanager
def beating(every_s: float = BEAT_EVERY_S) -> Iterator[None]:
    """Heartbeat from a thread while the stage runs: a stage is one long call (the date-mode
    seeds are one statement) with no per-batch loop to beat from. A hang is still bounded by
    the source's call timeout per round trip and by the actor's time limit (the supervisor
    enforces the deadline, not the heartbeat)."""
    with ticking(every_s, heartbeat, "stage-heartbeat"):
        yield


def run_unit(ctx: TraceUnit) -> None:
    """Run the stage and store its answer as the job's artifact."""
    stages = MsdStages(ctx.settings, get_broker().client)
    with beating():
        answer = orjson.dumps(run_stage(stages, ctx))
    ctx.store.put_artifact(ctx.job_id, ANSWER, answer)
    log.info("job %s: %s answer stored, %d bytes", ctx.job_id, ctx.section, len(answer))
