"""Crash recovery against a real Redis: requeue with delivery counts, dead-lettering past
max deliveries, give-back, the XAUTOCLAIM janitor and lease renewal.

Crashes are simulated by reading with a consumer and never acking. Idle times are set with
``XCLAIM ... IDLE`` instead of sleeping.
"""

from __future__ import annotations

import pytest

from tests import actors
from tests.helpers import wait_for
from tracebus.engine.keys import GROUP
from tracebus.engine.message import Message
from tracebus.engine.recovery import Janitor, reclaim_consumer, renew_leases


@pytest.fixture
def stream(broker):
    return broker.keys.stream("tests")


def pending(broker, stream) -> list[dict]:
    return broker.client.xpending_range(stream, GROUP, "-", "+", 1000)


def make_idle(broker, stream, consumer, entry_id, idle_ms=60_000) -> None:
    """Pretend ``entry_id`` has not been touched for ``idle_ms`` (delivery count unchanged)."""
    broker.client.xclaim(stream, GROUP, consumer, 0, [entry_id], idle=idle_ms, justid=True)


def crash_once(broker, consumer) -> dict:
    """A consumer reads the one entry of the queue, then "dies"; its entry is requeued."""
    [delivery] = broker.fetch(["tests"], consumer, 10, 10)
    broker.requeue_pending("tests", consumer, "killed by SIGKILL (out of memory?)")
    return {"prior": delivery.prior_deliveries, "message": delivery.message}


def test_each_crash_counts_a_delivery_and_the_entry_is_dead_lettered_at_the_limit(broker, stream):
    # Given a message and the default limit of 5 deliveries
    message = actors.record.send(1)
    assert broker.settings.max_deliveries == 5
    # When four consumers read it and die, it comes back each time with the count in `d`
    for crash in range(4):
        seen = crash_once(broker, f"c{crash}")
        assert seen == {"prior": crash, "message": message}
        [(_, fields)] = broker.client.xrange(stream)
        assert fields[b"d"] == str(crash + 1).encode()
    # When the fifth dies too
    assert crash_once(broker, "c4")["prior"] == 4
    # Then the entry is in the dead-letter stream with the reason and the count
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                           "delayed": 0, "dead": 1}
    [dead] = broker.dead_entries("tests")
    assert dead["reason"] == "killed by SIGKILL (out of memory?)"
    assert dead["deliveries"] == 5
    assert Message.decode(dead["payload"]) == message


def test_a_message_may_lower_its_delivery_limit(broker):
    actors.record.send_with_options(args=(1,), max_deliveries=2)
    crash_once(broker, "c0")
    crash_once(broker, "c1")
    assert broker.queue_stats("tests")["dead"] == 1


def test_an_actors_delivery_limit_applies_to_its_messages(broker):
    # `stuck` is declared with max_deliveries=2
    actors.stuck.send(1)
    crash_once(broker, "c0")
    crash_once(broker, "c1")
    assert broker.queue_stats("tests")["dead"] == 1


def test_a_delayed_message_keeps_its_delivery_limit_when_promoted(broker):
    broker.enqueue(actors.record.message((1,), max_deliveries=2), delay_ms=1)
    wait_for(lambda: broker.promote_due("tests"), 5, message="promotion")
    crash_once(broker, "c0")
    crash_once(broker, "c1")
    assert broker.queue_stats("tests")["dead"] == 1


def test_give_back_requeues_unstarted_entries_without_counting_the_delivery(broker, stream):
    # Given a consumer that read three entries
    actors.record.send_many([(1,), (2,), (3,)])
    first, second, third = broker.fetch(["tests"], "c1", 10, 10)
    # When it gives back the two it never started, many times over
    broker.give_back("tests", "c1", [second.entry_id, third.entry_id])
    for _ in range(10):
        again = broker.fetch(["tests"], "c1", 10, 10)
        broker.give_back("tests", "c1", [d.entry_id for d in again])
    # Then they are back in the queue with no delivery counted, never dead-lettered
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 2, "pending": 1,
                                           "delayed": 0, "dead": 0}
    assert [f[b"d"] for _, f in broker.client.xrange(stream)[1:]] == [b"0", b"0"]
    # And the started one is still pending under its consumer
    assert [p["message_id"].decode() for p in pending(broker, stream)] == [first.entry_id]


def test_reclaiming_a_dead_consumer_requeues_its_entries_then_removes_it(broker, stream):
    actors.record.send_many([(1,), (2,), (3,)])
    broker.fetch(["tests"], "dead-child", 2, 10)
    [kept] = broker.fetch(["tests"], "live-child", 2, 10)
    assert reclaim_consumer(broker, ["tests"], "dead-child", "killed by SIGKILL") == (2, 0)
    assert broker.queue_stats("tests")["length"] == 2
    assert [p["message_id"].decode() for p in pending(broker, stream)] == [kept.entry_id]
    consumers = {c["name"] for c in broker.client.xinfo_consumers(stream, GROUP)}
    assert consumers == {b"live-child"}


def test_an_entry_deleted_while_pending_is_recorded_as_dead_when_its_consumer_is_reclaimed(broker, stream):
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "c1", 10, 10)
    broker.client.xdel(stream, delivery.entry_id)
    assert broker.requeue_pending("tests", "c1", "exited with code 1") == (0, 0, 1)
    [dead] = broker.dead_entries("tests")
    assert dead["reason"] == "entry deleted while pending: exited with code 1"
    assert pending(broker, stream) == []


def test_the_janitor_requeues_entries_idle_past_the_claim_time(broker, stream):
    # Given two entries read by a worker on a host that died, one of them idle for a minute
    actors.record.send_many([(1,), (2,)])
    old, fresh = broker.fetch(["tests"], "lost-host:1:x", 10, 10)
    make_idle(broker, stream, "lost-host:1:x", old.entry_id)
    # When the janitor sweeps
    assert Janitor(broker, "janitor").sweep(["tests"]) == (1, 0, 0)
    # Then the idle one is back in the queue with its delivery counted, the fresh one untouched
    [(_, fields)] = broker.client.xrange(stream, min=f"({fresh.entry_id}")
    assert fields[b"m"] == old.raw
    assert fields[b"d"] == b"1"
    assert [(p["message_id"].decode(), p["consumer"]) for p in pending(broker, stream)] == \
        [(fresh.entry_id, b"lost-host:1:x")]


def test_the_janitor_follows_its_cursor_over_many_idle_entries(broker, stream):
    actors.record.send_many([(n,) for n in range(250)])
    for delivery in broker.fetch(["tests"], "lost", 250, 10):
        make_idle(broker, stream, "lost", delivery.entry_id)
    assert Janitor(broker, "janitor").sweep(["tests"], count=100) == (250, 0, 0)
    assert pending(broker, stream) == []
    assert broker.queue_stats("tests")["length"] == 250


def test_the_janitor_records_an_entry_deleted_while_pending_instead_of_dropping_it(broker, stream):
    # Given an idle pending entry that someone deleted from the stream
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "lost", 10, 10)
    make_idle(broker, stream, "lost", delivery.entry_id)
    broker.client.xdel(stream, delivery.entry_id)
    # When the janitor sweeps, XAUTOCLAIM reports it as deleted
    assert Janitor(broker, "janitor").sweep(["tests"]) == (0, 0, 1)
    # Then it is in the dead-letter stream, and no longer pending
    [dead] = broker.dead_entries("tests")
    assert dead["reason"] == "entry deleted while pending"
    assert broker.client.xrevrange(broker.keys.dead("tests"))[0][1][b"entry"] == delivery.entry_id.encode()
    assert pending(broker, stream) == []


def test_renewing_a_lease_resets_idle_time_without_counting_a_delivery(broker, stream):
    # Given an entry held by a live worker for a minute
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "live", 10, 10)
    make_idle(broker, stream, "live", delivery.entry_id)
    [before] = pending(broker, stream)
    assert before["time_since_delivered"] >= 60_000
    # When its lease is renewed
    assert renew_leases(broker, ["tests"], "live") == 1
    # Then it is fresh again, still owned by the same consumer, delivered once
    [after] = pending(broker, stream)
    assert after["time_since_delivered"] < 1_000
    assert after["times_delivered"] == before["times_delivered"] == 1
    assert after["consumer"] == b"live"
    # And the janitor leaves it alone
    assert Janitor(broker, "janitor").sweep(["tests"]) == (0, 0, 0)


def test_renewal_never_takes_back_an_entry_another_consumer_owns(broker, stream):
    # Given an entry the janitor already moved to another consumer
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "slow", 10, 10)
    broker.client.xclaim(stream, GROUP, "other", 0, [delivery.entry_id], justid=True)
    # When the original consumer renews its leases
    assert renew_leases(broker, ["tests"], "slow") == 0
    # Then the entry stays with its new owner
    assert [p["consumer"] for p in pending(broker, stream)] == [b"other"]


def test_renewal_keeps_an_entry_deleted_while_pending_for_the_janitor_to_record(broker, stream):
    # XCLAIM drops a deleted entry from the PEL silently; renewal must not do that
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "live", 10, 10)
    make_idle(broker, stream, "live", delivery.entry_id)
    broker.client.xdel(stream, delivery.entry_id)
    renew_leases(broker, ["tests"], "live")
    assert [p["message_id"].decode() for p in pending(broker, stream)] == [delivery.entry_id]
    assert Janitor(broker, "janitor").sweep(["tests"]) == (0, 0, 1)
    assert broker.queue_stats("tests")["dead"] == 1
