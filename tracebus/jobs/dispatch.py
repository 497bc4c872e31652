"""Sending a job's units to the queue its kind chose (the one way units are enqueued).

The job hash records the queue and the actor of its units at submit, so whoever refills a
job's in-flight window (the API at submit and retry, a worker after each unit, the jobs
middleware after a unit failed) sends them the same way, with no queue name of its own.
"""

from __future__ import annotations

import logging
from typing import Sequence

from tracebus.engine.actor import get_actor
from tracebus.engine.broker import Broker
from tracebus.engine.errors import ActorNotFound, BrokerError
from tracebus.engine.message import Message
from tracebus.jobs.share import Shares
from tracebus.jobs.store import JobStore

log = logging.getLogger(__name__)


class Dispatcher:
    """Enqueues units of jobs.

    Args:
        broker(Broker): the queue.
        store(JobStore): the job state (for each job's queue and actor).
    """

    def __init__(self, broker: Broker, store: JobStore):
        self.broker, self.store = broker, store

    def send(self, job_id: str, units: Sequence[int]) -> None:
        """Enqueue ``units`` of ``job_id`` in one round trip (nothing when empty)."""
        if not units:
            return
        queue, actor_name = self.store.route(job_id)
        self.broker.enqueue_many([self._message(queue, actor_name, job_id, u) for u in units])

    def start(self, job_id: str) -> None:
        """Send the first units of a job just created, up to its in-flight cap and its user's
        share (:mod:`tracebus.jobs.share`: none while the user's other jobs hold every place;
        the job starts when one of theirs settles).

        A submit that fails half way never strands the job: when the take or the send
        fails, the job is rolled back (:meth:`JobStore.abandon`: record, single-flight key
        and quota slot) and the error raised; when the job turns out to be live (a
        single-flight twin sent its units) it is left to run. Should the rollback fail too
        (Redis gone), the job sweeper finds the job with nothing queued and resumes it.

        Raises:
            BrokerError: the units could not be sent (and the job was rolled back).
        """
        taken: list[int] = []
        try:
            taken = Shares(self.store).open_units(job_id, only_own=True).get(job_id, [])
            self.send(job_id, taken)
        except BrokerError as error:
            try:
                abandoned = self.store.abandon(job_id, taken)
            except BrokerError as again:
                log.error("job %s: first units not sent (%s), rollback failed too (%s); the sweeper "
                          "will resume it", job_id, error, again)
                raise error from None
            if abandoned:
                log.warning("job %s rolled back: its first units could not be sent: %s", job_id, error)
                raise
            log.warning("job %s: this submit's units not sent (%s); the job is live and the sweeper "
                        "re-sends them", job_id, error)

    @staticmethod
    def _message(queue: str, actor_name: str, job_id: str, unit: int) -> Message:
        try:
            # The actor's options (its delivery limit) travel with each message.
            return get_actor(actor_name).message((job_id, unit)).copy(queue_name=queue)
        except ActorNotFound:
            return Message(queue, actor_name, (job_id, unit), {}, {})
