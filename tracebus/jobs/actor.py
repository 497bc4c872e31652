"""Declaring a job kind's unit actor: the one decorator an application needs.

A job kind writes a handler of one unit and declares it with :func:`unit_actor`; that
registers an engine actor (run by any ``tracebus worker`` that imports the module) and
declares the job layer's middleware (:class:`tracebus.jobs.middleware.JobUnits`) for
every worker of the process image.
"""

from __future__ import annotations

from typing import Any, Callable

from tracebus import logs
from tracebus.engine.actor import Actor, actor
from tracebus.engine.middleware import declare
from tracebus.jobs import runner
from tracebus.jobs.middleware import JobUnits


def unit_actor(actor_name: str, queue: str | Callable[[Any], str], **options) -> Callable[..., Actor]:
    """Declare the handler that runs one unit of a job kind, as an engine actor.

    Args:
        actor_name: the actor's registered name (recorded in each job of the kind).
        queue: the queue its units are read from by default (or a function of the settings).
        **options: engine actor options (retries, backoff, time limit).

    The handler is called with a :class:`~tracebus.jobs.runner.UnitContext`; declaring one
    also declares the jobs middleware for every worker of this process image.
    """
    def decorate(handler: Callable[[runner.UnitContext], None]) -> Actor:
        def run(job_id: str, unit: int) -> None:
            runner.run_unit(handler, job_id, unit)

        run.__qualname__ = run.__name__ = handler.__qualname__
        run.__module__ = handler.__module__
        runner.UNIT_ACTORS.add(actor_name)
        declare(JobUnits)
        logs.describe_messages(actor_name, lambda job_id, unit: {"job_id": job_id, "unit": unit})
        return actor(run, actor_name=actor_name, queue=queue, **options)

    return decorate
