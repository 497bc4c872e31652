"""The job layer's hooks in every worker that runs job units (a :class:`Middleware`).

:class:`JobUnits` is declared by :func:`tracebus.jobs.actor.unit_actor`, so a worker
that imports a job kind installs it; the worker loop never names it. It

* binds the process's job store and dispatcher after the fork (``after_worker_boot``);
* fails a job that ran past ``TRACE_JOB_TIMEOUT_SECONDS`` before one of its units starts
  (unsettled units are cancelled, finished ones kept; a retry re-runs the rest);
* settles a unit whose retries are exhausted: the unit is failed (its section goes
  partial), the job's window refilled, and the message acked, not dead-lettered, since
  the failure is recorded where the job's user sees it;
* fails the whole job at once when a unit meets a full Redis (``RedisFull``: maxmemory
  reached): no unit of it can store rows until memory is freed, so the job ends ``failed``
  with that reason instead of holding a window nobody can refill (a retry re-runs it); and
  likewise when its user's budget refuses the unit's rows (``BudgetExceeded``,
  :mod:`tracebus.jobs.budget`);
* in the supervisor, runs the sweeper of stranded and timed-out jobs
  (:mod:`tracebus.jobs.sweeper`, ``supervisor_tick``).
"""

from __future__ import annotations

import logging

from tracebus.engine.errors import RedisFull
from tracebus.engine.middleware import Middleware
from tracebus.jobs import runner
from tracebus.jobs.errors import BudgetExceeded
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.settings import JobSettings
from tracebus.jobs.store import JobStore
from tracebus.jobs.sweeper import Sweeper

log = logging.getLogger(__name__)


class JobUnits(Middleware):
    """Job-level hooks around the unit actors of every job kind."""

    def __init__(self):
        self.store: JobStore | None = None
        self.sweeper: Sweeper | None = None

    def after_worker_boot(self, worker) -> None:
        settings = JobSettings.adopt(worker.broker.settings)
        self.store = JobStore(worker.broker.client, settings)
        runner.bind(self.store, Dispatcher(worker.broker, self.store))

    def before_process(self, worker, actor, message) -> None:
        if actor.actor_name not in runner.UNIT_ACTORS:
            return
        job_id = message.args[0]
        if self.store.overdue(job_id) and self.store.time_out(job_id):
            log.error("job %s failed: ran past %d s", job_id, self.store.settings.job_timeout_s)

    def handle_failure(self, worker, actor, delivery, error) -> bool:
        if actor.actor_name not in runner.UNIT_ACTORS:
            return False
        job_id, unit = delivery.message.args[:2]
        if isinstance(error, (RedisFull, BudgetExceeded)):
            runner.current = None
            if self.store.fail(job_id, f"unit {unit} could not store its rows: {error}"):
                log.error("job %s failed: %s (unit %d)", job_id,
                          "Redis is full" if isinstance(error, RedisFull) else "past its user's budget", unit)
            worker.ack_later(delivery)
            return True
        if not runner.fail_current(job_id, unit, error):
            return False
        worker.ack_later(delivery)
        return True

    def supervisor_tick(self, supervisor) -> None:
        if self.sweeper is None:
            store = JobStore(supervisor.broker.client, JobSettings.adopt(supervisor.broker.settings))
            self.sweeper = Sweeper(store, Dispatcher(supervisor.broker, store))
        self.sweeper.maybe_sweep()
