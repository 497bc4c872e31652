"""The pool of places (tracebus.jobs.places): the cap, fairness between groups, leases of dead
holders and waiters, and the keys' expiry, on a real redis-server."""

from __future__ import annotations

import threading
import time

import pytest

from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.places import PlaceLost, Places, Usage


def pool(client, capacity, lease_ms=6000):
    return Places(client, JobKeys("tbtest"), "source", capacity, lease_ms=lease_ms)


@ON_NODE_AND_CLUSTER
def test_the_cap_holds_and_a_released_place_goes_to_the_waiter(redis_client):
    places = pool(redis_client, 2)
    assert places.try_take("a1", "job-a") and places.try_take("b1", "job-b")
    assert not places.try_take("c1", "job-c")
    assert places.usage() == Usage(in_use=2, waiting=1, capacity=2)
    assert places.release("a1")
    assert places.try_take("c1", "job-c")
    assert places.usage() == Usage(in_use=2, waiting=0, capacity=2)
    for key in JobKeys("tbtest").places("source"):
        if redis_client.exists(key):
            assert 0 < redis_client.pttl(key) <= 60_000, key


def test_a_free_place_goes_to_the_group_holding_fewest(redis_client):
    places = pool(redis_client, 2)
    assert places.try_take("a1", "big") and places.try_take("a2", "big")
    assert not places.try_take("a3", "big")     # asked first
    assert not places.try_take("b1", "small")   # asked later, but its job holds nothing
    places.release("a1")
    assert not places.try_take("a3", "big"), "the big job's waiter went before the small job's"
    assert places.try_take("b1", "small")
    places.release("a2")
    assert places.try_take("a3", "big")


def test_equal_groups_are_served_in_the_order_they_asked(redis_client):
    places = pool(redis_client, 1)
    assert places.try_take("h", "x")
    assert not places.try_take("first", "y")
    assert not places.try_take("second", "z")
    places.release("h")
    assert not places.try_take("second", "z")
    assert places.try_take("first", "y")


def test_a_dead_holders_place_comes_back_after_its_lease_and_not_before(redis_client):
    places = pool(redis_client, 1, lease_ms=400)
    assert places.try_take("dead", "job-a")
    taken = time.monotonic()
    granted_after = None
    deadline = taken + 10
    while time.monotonic() < deadline:
        if places.try_take("alive", "job-b"):
            granted_after = time.monotonic() - taken
            break
    assert granted_after is not None, "the dead holder's place never came back"
    assert granted_after >= 0.3
    with pytest.raises(PlaceLost):
        places.renew("dead", "job-a")


def test_a_dead_waiter_does_not_hold_back_the_next(redis_client):
    places = pool(redis_client, 1, lease_ms=400)
    assert places.try_take("h", "x")
    assert not places.try_take("dead-waiter", "y")   # then never polls again
    places.release("h")
    deadline = time.monotonic() + 10
    while not places.try_take("live-waiter", "z"):
        assert time.monotonic() < deadline, "a dead waiter's ticket never expired"
    assert places.usage() == Usage(in_use=1, waiting=0, capacity=1)


def test_take_waits_without_a_place_and_stops_when_told(redis_client):
    places = pool(redis_client, 1)
    assert places.try_take("h", "x")
    stop = threading.Event()

    def should_stop():
        if stop.is_set():
            raise RuntimeError("job cancelled")

    def stop_once_filed():
        while places.usage().waiting == 0:
            time.sleep(0.01)
        stop.set()

    threading.Thread(target=stop_once_filed, daemon=True).start()
    with pytest.raises(RuntimeError, match="job cancelled"):
        places.take("w", "y", should_stop=should_stop)
    assert places.usage() == Usage(in_use=1, waiting=0, capacity=1)


def test_a_renewed_lease_outlives_its_first_term(redis_client):
    places = pool(redis_client, 1, lease_ms=1500)
    assert places.try_take("h", "x")
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        places.renew("h", "x")
        assert not places.try_take("other", "y")
        time.sleep(0.05)
