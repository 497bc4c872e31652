"""Messages: the msgpack codec, and what happens to an entry that cannot be decoded or run."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from tests import actors
from tests.conftest_proc import run_until
from tracebus.engine.errors import DecodeError
from tracebus.engine.message import FORMAT, Message


def test_a_message_survives_an_encode_decode_round_trip_unchanged():
    message = Message("tests", "record", (1, "two", [3.5, None], b"\x00raw"),
                      {"k": {"nested": [1, 2]}, "u": "ünïcode"}, {"retries": 2, "max_retries": 5})
    decoded = Message.decode(message.encode())
    assert decoded == message
    assert decoded.args == (1, "two", [3.5, None], b"\x00raw")
    assert isinstance(decoded.args, tuple)


def test_two_messages_get_distinct_ids_and_a_creation_time():
    first, second = Message("q", "a"), Message("q", "a")
    assert first.message_id != second.message_id
    assert len(first.message_id) == 32
    assert first.message_timestamp_ms > 1_600_000_000_000


def test_a_message_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Message("q", "a").queue_name = "other"


def test_copy_keeps_the_message_id_and_merges_options():
    message = Message("q", "a", (1,), {}, {"retries": 0, "max_retries": 7})
    retried = message.copy(options={"retries": 1})
    assert retried.message_id == message.message_id
    assert retried.options == {"retries": 1, "max_retries": 7}
    assert message.options == {"retries": 0, "max_retries": 7}


def test_copy_can_change_any_field():
    assert Message("q", "a").copy(queue_name="other").queue_name == "other"


def test_the_encoding_is_a_msgpack_array_any_language_can_read():
    message = Message("q", "act", (1,), {"x": 2}, {}, "id", 123)
    assert msgpack.unpackb(message.encode()) == [FORMAT, "q", "act", [1], {"x": 2}, {}, "id", 123]


@pytest.mark.parametrize("data", [
    b"garbage, not msgpack",
    b"",
    b"\x93\x01\x02",  # a truncated array
    msgpack.packb({"not": "an array"}),
    msgpack.packb([FORMAT + 1, "q", "a", [], {}, {}, "id", 1]),  # a future format
    msgpack.packb([FORMAT, "q", "a", "args-not-a-list", {}, {}, "id", 1]),
])
def test_undecodable_bytes_raise_a_decode_error_carrying_the_raw_bytes(data):
    with pytest.raises(DecodeError) as caught:
        Message.decode(data)
    assert caught.value.data == data
    assert caught.value.error is not None


def test_an_undecodable_entry_is_dead_lettered_by_the_worker_with_its_raw_bytes(broker, worker):
    # Given a stream entry whose payload is not a message
    broker.declare_queue("tests")
    broker.client.xadd(broker.keys.stream("tests"), {"m": b"\xc1garbage"})
    # When a worker reads it
    run_until(worker, lambda: broker.queue_stats("tests")["dead"] == 1, message="dead letter")
    # Then it is in the dead-letter stream as it was, and the work stream is empty
    [dead] = broker.dead_entries("tests")
    assert dead["payload"] == b"\xc1garbage"
    assert dead["reason"] == "undecodable entry"
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                           "delayed": 0, "dead": 1}


def test_a_message_for_an_unknown_actor_is_dead_lettered_by_the_worker(broker, worker):
    message = broker.enqueue(Message("tests", "no_such_actor", (1,)))
    run_until(worker, lambda: broker.queue_stats("tests")["dead"] == 1, message="dead letter")
    [dead] = broker.dead_entries("tests")
    assert "no actor named 'no_such_actor'" in dead["reason"]
    assert Message.decode(dead["payload"]) == message


def test_a_worker_process_survives_undecodable_entries_and_unknown_actors(supervisor):
    # Given a pool of one worker
    pool = supervisor(processes=1)
    broker, [pid] = pool.broker, pool.workers()
    # When garbage, an entry without a payload, a message for an unknown actor and a good
    # message arrive, in that order
    broker.client.xadd(broker.keys.stream("tests"), {"m": b"not a message"})
    broker.client.xadd(broker.keys.stream("tests"), {"other": b"no m field at all"})
    broker.enqueue(Message("tests", "no_such_actor"))
    actors.record.send(1)
    # Then the good message runs in the same process, and the bad ones are dead letters
    runs = f"{broker.keys.prefix}:test:runs"
    pool.wait(lambda: broker.client.hget(runs, 1) == b"1", message="record(1) to run")
    pool.wait(lambda: broker.queue_stats("tests")["dead"] == 3, message="3 dead letters")
    assert pool.workers() == {pid}
    reasons = [d["reason"] for d in broker.dead_entries("tests")]
    assert reasons.count("undecodable entry") == 2
    assert "no actor named 'no_such_actor' is registered in this process" in reasons
    pool.wait_queue(dead=3)
