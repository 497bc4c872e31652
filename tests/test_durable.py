"""TRACEBUS_REDIS_WAIT_REPLICAS: a write that must survive a failover waits for replicas,
and too few acknowledgements are "Redis is moving" (on a real Sentinel group: one replica)."""

from __future__ import annotations

import time

import pytest

from tracebus.engine.errors import BrokerConnectionError
from tracebus.engine.scripts import ENGINE_SCRIPTS


@pytest.fixture
def delay_script(redis_client):
    return ENGINE_SCRIPTS.register(redis_client, "delay")


@pytest.mark.parametrize("topology", ["sentinel"], indirect=True)
def test_a_write_acknowledged_by_the_replica_returns_its_result(redis_client, delay_script):
    due = delay_script({"delayed": "tbtest:d"}, {"delay_ms": 1000, "payload": b"x"}, wait=(1, 2000))
    assert int(due) > 0 and redis_client.zscore("tbtest:d", b"x") == due


@pytest.mark.parametrize("topology", ["sentinel"], indirect=True)
def test_too_few_replicas_is_redis_moving_after_the_timeout(redis_client, delay_script):
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match="reached 1 of 2 replicas"):
        delay_script({"delayed": "tbtest:d"}, {"delay_ms": 1000, "payload": b"y"}, wait=(2, 300))
    assert 0.25 < time.monotonic() - started < 3


def test_no_wait_by_default_even_without_replicas(redis_client, delay_script):
    assert delay_script({"delayed": "tbtest:d"}, {"delay_ms": 1000, "payload": b"z"}, wait=(0, 1))
