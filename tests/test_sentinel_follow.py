"""After ``SENTINEL FAILOVER`` the old primary goes on accepting writes until Sentinel demotes it,
some 8 s later, and discards them all when it resyncs. A client must leave it as soon as the
sentinels name the new primary (within ``FOLLOW_EVERY_S``), not at the demotion: a worker that
stayed wrote whole units into the lost copy, and the failover test once read a job "completed"
there, then found it running again on the new primary (``JobNotComplete`` on its first page)."""

from __future__ import annotations

import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracebus.engine.connection import FOLLOW_EVERY_S, PrimaryMoved
from tracebus.engine.connection import redis_client as connect


def port_of(client: redis.Redis) -> int:
    return int(client.info("server")["tcp_port"])


def role_of(port: int) -> str:
    node = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        return node.execute_command("ROLE")[0].decode()
    finally:
        node.close()


def write_until_on(client: redis.Redis, key: str, port: int, timeout_s: float) -> int:
    """Write ``key`` until the write lands on ``port``; returns how many PrimaryMoved it took."""
    moved, deadline = 0, time.monotonic() + timeout_s
    node = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        while True:
            try:
                client.set(key, 1)
                if node.get(key) == b"1":
                    return moved
            except PrimaryMoved:
                moved += 1
            assert time.monotonic() < deadline, f"the client still writes to another primary than {port}"
            time.sleep(0.05)
    finally:
        node.close()


@pytest.mark.parametrize("topology", ["sentinel"], indirect=True)
def test_clients_leave_the_old_primary_before_it_is_demoted(redis_client, sentinel_group):
    loose = redis_client  # the API's kind: follows silently
    strict = connect(sentinel_group.url, strict_primary=True, retry=Retry(NoBackoff(), 0))  # the workers' kind
    try:
        old = port_of(loose)
        assert port_of(strict) == old
        promoted = time.monotonic()
        new = sentinel_group.failover()
        assert new != old
        # Nothing but the clients' own questions moves them: Sentinel demotes the old primary
        # (killing its connections) only about 8 s after the promotion.
        bound = FOLLOW_EVERY_S + 2.0
        write_until_on(loose, "after", new, bound)
        assert write_until_on(strict, "after-strict", new, bound) >= 1, \
            "a strict client moved without failing once: a unit would have gone on half-moved"
        assert role_of(old) == "master", "Sentinel demoted the old primary already: this proves nothing"
        print(f"both clients on the new primary {time.monotonic() - promoted:.2f} s after asking for it")
    finally:
        strict.close()
        sentinel_group.wait_replica()  # the group left whole: the next test may WAIT for a replica
