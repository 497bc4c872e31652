"""A job kind of the fairness test (tests/test_job_fairness.py), in the tests only: each unit
works ``app["unit_s"]`` seconds (a stand-in for a statement) and writes one row per item."""

from __future__ import annotations

import time

from tracebus.jobs.actor import unit_actor

ACTOR = "test_fair_unit"
QUEUE = "tests"


@unit_actor(ACTOR, queue=QUEUE)
def fair_unit(ctx) -> None:
    time.sleep(ctx.app["unit_s"])
    ctx.write(["ITEM"], [[item] for item in ctx.input])
