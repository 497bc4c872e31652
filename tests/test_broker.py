"""The Streams broker against a real Redis: enqueue, fetch, ack, delays, retries, dead letters."""

from __future__ import annotations

import pytest

from tests import actors
from tests.conftest_proc import run_until
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.engine.wire import check_redis_version
from tracebus.engine.errors import UnsupportedRedis
from tracebus.engine.keys import GROUP
from tracebus.engine.message import Message, now_ms


def runs(broker, n) -> int:
    return int(broker.client.hget(f"{broker.keys.prefix}:test:runs", n) or 0)


@ON_NODE_AND_CLUSTER
def test_an_acked_entry_is_deleted_from_the_stream_and_the_pending_list(broker):
    # Given a message sent and read by a consumer
    sent = actors.record.send(1)
    stream = broker.keys.stream("tests")
    [delivery] = broker.fetch(["tests"], "c1", 10, 10)
    assert delivery.message == sent
    assert broker.client.xpending(stream, GROUP)["pending"] == 1
    # When it is acked
    broker.ack("tests", [delivery.entry_id])
    # Then nothing is left: the work stream is never trimmed, so ack must delete
    assert broker.client.xlen(stream) == 0
    assert broker.client.xpending(stream, GROUP)["pending"] == 0


def test_fetch_returns_nothing_after_blocking_on_an_empty_queue(broker):
    broker.declare_queue("tests")
    assert broker.fetch(["tests"], "c1", 10, 10) == []


def test_declaring_a_queue_twice_is_harmless_and_lists_it(broker):
    broker.declare_queue("tests")
    broker.declare_queue("tests")
    broker._declared.clear()
    broker.declare_queue("tests")  # BUSYGROUP is "exists"
    assert broker.queues() == ["tests"]


def test_enqueue_many_sends_every_message_in_order(broker):
    messages = [actors.record.message((n,)) for n in range(250)]
    broker.enqueue_many(messages)
    assert broker.queue_stats("tests")["length"] == 250
    fetched = broker.fetch(["tests"], "c1", 500, 10)
    assert [d.message for d in fetched] == messages


def test_send_many_accepts_args_and_args_kwargs_pairs(broker):
    sent = actors.slow_record.send_many([(1, 0.0), ((2,), {"seconds": 0.0})])
    fetched = [d.message for d in broker.fetch(["tests"], "c1", 10, 10)]
    assert fetched == sent
    assert (fetched[0].args, fetched[1].args, fetched[1].kwargs) == ((1, 0.0), (2,), {"seconds": 0.0})


def test_a_delayed_message_waits_in_the_delayed_set_until_it_is_due(broker):
    # Given a message sent with a delay
    message = actors.record.send_with_options(args=(1,), delay=60_000)
    delayed = broker.keys.delayed("tests")
    [(member, due_ms)] = broker.client.zrange(delayed, 0, -1, withscores=True)
    assert Message.decode(member) == message
    assert now_ms() + 55_000 < due_ms <= now_ms() + 60_000
    # When promotion runs before it is due, nothing moves
    assert broker.promote_due("tests") == 0
    assert broker.queue_stats("tests")["length"] == 0
    # When it is due, it moves onto the stream and leaves the delayed set
    broker.client.zadd(delayed, {member: now_ms() - 1})
    assert broker.promote_due("tests") == 1
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 1, "pending": 0,
                                           "delayed": 0, "dead": 0}
    assert broker.fetch(["tests"], "c1", 10, 10)[0].message == message


def test_promote_moves_only_the_due_messages(broker):
    broker.declare_queue("tests")
    delayed = broker.keys.delayed("tests")
    due = [actors.record.message((n,)) for n in range(3)]
    later = [actors.record.message((n,)) for n in range(3, 5)]
    broker.client.zadd(delayed, {m.encode(): now_ms() - 10 for m in due})
    broker.client.zadd(delayed, {m.encode(): now_ms() + 60_000 for m in later})
    assert broker.promote_due("tests") == 3
    assert sorted(d.message.args for d in broker.fetch(["tests"], "c1", 10, 10)) == [(0,), (1,), (2,)]
    assert broker.client.zcard(delayed) == 2


def test_retry_later_acks_the_entry_and_schedules_the_copy_in_one_step(broker):
    actors.record.send(1)
    [delivery] = broker.fetch(["tests"], "c1", 10, 10)
    retry = delivery.message.copy(options={"retries": 1})
    broker.retry_later(delivery, retry, 5_000)
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                           "delayed": 1, "dead": 0}
    [(member, due_ms)] = broker.client.zrange(broker.keys.delayed("tests"), 0, -1, withscores=True)
    assert Message.decode(member) == retry
    assert due_ms > now_ms() + 4_000


@ON_NODE_AND_CLUSTER
def test_a_flaky_actor_is_retried_with_backoff_until_it_succeeds(broker, worker):
    # Given an actor that fails twice (backoff 50-200 ms)
    actors.flaky.send(1, 2)
    # When a worker runs it, promoting retries as they fall due
    run_until(worker, lambda: runs(broker, 1) == 1, message="flaky to succeed")
    # Then it ran three times, once successfully, and nothing is left anywhere
    assert broker.client.hget(f"{broker.keys.prefix}:test:attempts", 1) == b"3"
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                           "delayed": 0, "dead": 0}


def test_a_failing_retry_is_delayed_by_the_backoff(broker, worker):
    actors.flaky.send(1, 10)
    [delivery] = broker.fetch(["tests"], worker.consumer, 10, 10)
    before = now_ms()
    worker.process(delivery)
    [(member, due_ms)] = broker.client.zrange(broker.keys.delayed("tests"), 0, -1, withscores=True)
    assert Message.decode(member).options["retries"] == 1
    assert Message.decode(member).message_id == delivery.message.message_id
    assert before + 25 <= due_ms <= now_ms() + 50  # min_backoff_ms=50, jittered to [25, 50]


@ON_NODE_AND_CLUSTER
def test_an_actor_out_of_retries_is_dead_lettered_with_the_reason_and_traceback(broker, worker):
    message = actors.always_fails.send(7)
    run_until(worker, lambda: broker.queue_stats("tests")["dead"] == 1, message="dead letter")
    [dead] = broker.dead_entries("tests")
    assert dead["reason"].startswith("gave up after 0 retries: ValueError: broken message 7\n")
    assert "Traceback (most recent call last)" in dead["reason"]
    assert "always_fails" in dead["reason"]
    assert Message.decode(dead["payload"]) == message
    assert broker.queue_stats("tests")["pending"] == 0


def test_the_dead_letter_stream_expires(broker, worker):
    actors.always_fails.send(1)
    run_until(worker, lambda: broker.queue_stats("tests")["dead"] == 1, message="dead letter")
    assert 0 < broker.client.ttl(broker.keys.dead("tests")) <= broker.settings.dead_ttl_s


@pytest.mark.parametrize("version", ["7.0.0", "7.0.15", "7.2.4", "8.2.1", "10.0.0", "7.0.0-rc1"])
def test_redis_7_and_newer_are_accepted(version):
    check_redis_version(version, "redis://x")


@pytest.mark.parametrize("version", ["6.2.14", "6.0.0", "5.0.7", "2.8.24", "6.9.240"])
def test_redis_older_than_7_is_refused_with_a_clear_message(version):
    with pytest.raises(UnsupportedRedis, match=f"Redis {version} at redis://x is too old: "
                                               "tracebus needs 7.0 or newer"):
        check_redis_version(version, "redis://x")


def test_a_version_that_cannot_be_read_is_refused(broker):
    with pytest.raises(UnsupportedRedis, match="cannot read"):
        check_redis_version("unknown", "redis://x")


def test_the_test_server_passes_the_version_check(broker):
    assert broker.check_server().startswith("7.")
