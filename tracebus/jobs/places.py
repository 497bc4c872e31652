"""A pool of places shared by every process and host on one Redis: leases that cap a resource.

The trace application caps the sessions all workers hold against the event source with one
pool (``TRACEBUS_SOURCE_MAX_SESSIONS``), but nothing here knows about sources. A place is a
lease (``place_take.lua``): its holder renews it while it works and gives it back after; a
holder that dies stops renewing, and its place is free again :data:`LEASE_MS` later. A caller
waiting for a place holds a ticket that it refreshes with every poll, so a dead waiter drops
out as fast. When a place frees up it goes to the waiter whose group (a job) holds the
fewest places, the longest-waiting first among equals: one big job cannot starve a small one.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import redis

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.scripts import script

log = logging.getLogger(__name__)

#: A lease or waiting ticket not renewed for this long is dropped (its holder died or froze):
#: a dead holder's place is free again within it.
LEASE_MS = 6000
#: How often a holder renews its lease (well inside :data:`LEASE_MS`).
RENEW_EVERY_S = 1.0
#: Poll interval of a waiter (with jitter): the delay between a place freeing up and its taker.
POLL_S = 0.05
#: The pool's keys expire this long after their last write.
KEY_TTL_MS = 60_000


@dataclass(frozen=True)
class Usage:
    """A pool at one moment: places in use, callers waiting, and the capacity the takers last
    asked with (None when no one has for a minute: the keys expired)."""

    in_use: int
    waiting: int
    capacity: int | None = None


class PlaceLost(Exception):
    """A holder's lease ran out (it was frozen past :data:`LEASE_MS`) and its place went to another."""


class Places:
    """One pool of places.

    Args:
        client(redis.Redis): the Redis every process of the system shares.
        keys(JobKeys): key names under the system's prefix.
        pool(str): the pool's name (``source``).
        capacity(int): places in the pool (this caller's setting; every host should agree).
        lease_ms(int): see :data:`LEASE_MS` (shorter in tests).
    """

    def __init__(self, client: redis.Redis, keys: JobKeys, pool: str, capacity: int, lease_ms: int = LEASE_MS):
        self.client, self.pool, self.capacity, self.lease_ms = client, pool, capacity, lease_ms
        self._keys = dict(zip(("held", "waiting", "info"), keys.places(pool)))
        self._take = script(client, "place_take")
        self._release = script(client, "place_release")

    def new_holder(self) -> str:
        """A fresh holder token (one per attempt at a place)."""
        return uuid.uuid4().hex

    def _call(self, holder: str, group: str, renew: bool) -> tuple[int, int, int]:
        with redis_errors():
            got = self._take(self._keys, {"holder": holder, "group": group,
                                          "lease_ms": self.lease_ms, "capacity": self.capacity,
                                          "key_ttl_ms": max(KEY_TTL_MS, 10 * self.lease_ms),
                                          "renew": 1 if renew else 0})
        return int(got[0]), int(got[1]), int(got[2])

    def try_take(self, holder: str, group: str) -> bool:
        """Take a place now if one is free and no fairer waiter is ahead; else (re)file the
        holder as waiting. Call it again within the lease to stay in line."""
        return self._call(holder, group, renew=False)[0] == 1

    def take(self, holder: str, group: str, should_stop: Callable[[], None] = lambda: None,
             on_wait: Callable[[], None] = lambda: None) -> None:
        """Wait until ``holder`` has a place.

        Args:
            should_stop: called between polls; it raises to stop waiting (the caller's job was
                cancelled, say), and the ticket is withdrawn.
            on_wait: called between polls (a heartbeat).
        """
        try:
            while not self.try_take(holder, group):
                should_stop()
                on_wait()
                time.sleep(POLL_S * random.uniform(0.5, 1.5))
        except BaseException:
            self.release(holder)
            raise

    def renew(self, holder: str, group: str) -> None:
        """Extend the holder's lease.

        Raises:
            PlaceLost: the lease had run out and no place is free to take back.
        """
        if self._call(holder, group, renew=True)[0] != 1:
            raise PlaceLost(f"place of {holder} in pool {self.pool} lost: its lease ran out")

    def release(self, holder: str) -> bool:
        """Give the place back (or stop waiting). True when the holder had a place."""
        with redis_errors():
            return bool(self._release(self._keys, {"holder": holder}))

    def usage(self) -> Usage:
        """Places in use and waiters now (live ones: expired leases and tickets not counted)."""
        with redis_errors():
            seconds, micros = self.client.time()
            now = seconds * 1000 + micros // 1000
            pipe = self.client.pipeline(transaction=False)
            pipe.zcount(self._keys["held"], now, "+inf")
            pipe.zcount(self._keys["waiting"], now, "+inf")
            pipe.hget(self._keys["info"], "~capacity")
            held, waiting, capacity = pipe.execute()
        return Usage(int(held), int(waiting), int(capacity) if capacity is not None else None)
