"""Results for any actor (``store_results=True``): stored by real worker processes as msgpack
in Redis with a TTL, read back with ``message.get_result`` as Dramatiq's Results does."""

from __future__ import annotations

import threading
import time

import pytest

import tests.actors as actors
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.engine.errors import ResultFailure, ResultMissing, ResultTimeout
from tracebus.engine.middleware.results import encode_value, store


@ON_NODE_AND_CLUSTER
def test_a_result_is_stored_with_a_ttl_and_read_back_blocking(supervisor):
    pool = supervisor(processes=1)
    message = actors.add.send(2, 40)
    assert message.get_result(block=True, timeout=10_000) == 42
    assert message.get_result() == 42  # reading never consumes it
    key = pool.broker.keys.result(message.message_id)
    ttl_ms = pool.broker.client.pttl(key)
    assert 0 < ttl_ms <= 3600 * 1000  # TRACEBUS_RESULT_TTL_SECONDS


def test_not_blocking_before_the_message_ran_is_result_missing(broker):
    message = actors.add.send(1, 1)  # no worker is running
    with pytest.raises(ResultMissing):
        message.get_result()
    started = time.monotonic()
    with pytest.raises(ResultTimeout):
        message.get_result(block=True, timeout=300)
    assert 0.25 < time.monotonic() - started < 3


def test_a_final_failure_surfaces_as_result_failure_after_the_retries(supervisor):
    pool = supervisor(processes=1)
    message = actors.fails_with_result.send("x")
    with pytest.raises(ResultFailure) as caught:
        message.get_result(block=True, timeout=10_000)
    assert caught.value.error_type == "KeyError" and "no such thing x" in caught.value.error_message
    assert "Traceback" in caught.value.traceback
    # stored once, after the one retry: both attempts ran
    assert pool.broker.client.hget(f"{pool.broker.keys.prefix}:test:attempts", "x") == b"2"


def test_a_value_msgpack_cannot_encode_is_a_failure_and_the_actor_ttl_applies(supervisor):
    pool = supervisor(processes=1)
    message = actors.unstorable.send()
    with pytest.raises(ResultFailure, match="cannot be stored as msgpack"):
        message.get_result(block=True, timeout=10_000)
    assert 0 < pool.broker.client.pttl(pool.broker.keys.result(message.message_id)) <= 1500


def test_actors_without_store_results_store_nothing(supervisor):
    pool = supervisor(processes=1)
    message = actors.record.send("n1")
    pool.wait_queue()
    assert not pool.broker.client.keys(f"{pool.broker.keys.prefix}:result:*")
    with pytest.raises(ResultMissing):
        message.get_result()


def test_store_results_per_message(supervisor):
    supervisor(processes=1)
    message = actors.record.send_with_options(args=("n2",), store_results=True)
    assert message.get_result(block=True) is None


def socket_timeout(broker) -> float:
    return broker.client.connection_pool.connection_kwargs["socket_timeout"]


def test_a_wait_longer_than_the_socket_timeout_ends_in_result_timeout(broker):
    # A 5 s BLMOVE on a socket whose timeout is TRACEBUS_REDIS_TIMEOUT_SECONDS' 4 s failed after
    # about 4 s with "Redis unreachable: Timeout reading" (issue 36); the wait is cut in slices.
    assert socket_timeout(broker) == 4
    message = actors.add.send(1, 2)  # no worker is running
    started = time.monotonic()
    with pytest.raises(ResultTimeout, match="within 4500 ms"):
        message.get_result(block=True, timeout=4500)
    assert 4.5 <= time.monotonic() - started < 8


def test_a_result_stored_after_the_socket_timeout_reaches_a_10_s_wait(broker):
    assert socket_timeout(broker) == 4
    message = actors.add.send(2, 3)  # no worker: the test stores the outcome itself, past 4 s
    later = threading.Timer(5.0, store, (broker, message, encode_value(5), 60_000))
    started = time.monotonic()
    later.start()
    try:
        assert message.get_result(block=True, timeout=10_000) == 5
    finally:
        later.cancel()
    assert 5 <= time.monotonic() - started < 10
