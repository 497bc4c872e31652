"""A message no actor can run is dead-lettered on first sight, and never kills the worker
(issue 24, finding 10: ``tracebus send trace_unit '"x"' --queue trace-events`` crashed every
worker that read it until its deliveries ran out)."""

from __future__ import annotations

from tests import actors
from tests.conftest_proc import run_until
from tracebus.engine.message import Message
from tracebus.engine.middleware import Middleware
from tracebus.engine.processing import arguments_mismatch


def test_arguments_the_actor_cannot_take_are_dead_lettered_on_first_sight(broker, worker):
    # Given a message to record(n) with two arguments, and one with a keyword it does not know
    broker.enqueue(Message("tests", "record", ("a", "b")))
    broker.enqueue(Message("tests", "record", (), {"m": 1}))

    # When the worker reads them once
    for delivery in broker.fetch(["tests"], worker.consumer, 10, 20):
        worker.process(delivery)

    # Then both are dead letters already (no retry, no redelivery), saying why
    reasons = sorted(d["reason"] for d in broker.dead_entries("tests"))
    assert len(reasons) == 2 and all(r.startswith("undecodable arguments for record: ") for r in reasons), reasons
    assert broker.queue_stats("tests")["pending"] == 0


class _Trips(Middleware):
    """A middleware that cannot settle the failures it is given (as the jobs one did on '"x"')."""

    def handle_failure(self, worker, actor, delivery, error) -> bool:
        job_id, unit = delivery.message.args[:2]  # ValueError on one argument
        return False


def test_a_middleware_tripping_on_a_failure_dead_letters_the_message_instead_of_killing_the_worker(
        broker, worker):
    worker.middleware.append(_Trips())
    actors.always_fails.send(3)
    run_until(worker, lambda: broker.queue_stats("tests")["dead"] == 1, message="dead letter")
    [dead] = broker.dead_entries("tests")
    assert "ValueError: broken message 3" in dead["reason"]


def test_arguments_mismatch_names_the_problem():
    def unit(job_id, unit, *, attempt=0):
        pass

    assert arguments_mismatch(unit, ("j", 1), {}) is None
    assert arguments_mismatch(unit, ("j", 1), {"attempt": 2}) is None
    assert "missing a required argument" in arguments_mismatch(unit, ("x",), {})
    assert "unexpected keyword" in arguments_mismatch(unit, ("j", 1), {"nope": 1})
    assert "must be a list" in arguments_mismatch(unit, "x", {})
