"""Redis going away under a running system: a dropped connection, a 3 s outage, a stop while
Redis is down. Each process backs off, logs one line per state change, reconnects and goes
on; a worker hands back its own pending entries at once instead of after the claim time.

The supervisors here run against a private redis-server with AOF (so a restart keeps the
queue), on a fixed port, stopped and started by the test. The claim time is a minute, so
nothing here can be rescued by the janitor: only the worker's own recovery is measured.
"""

from __future__ import annotations

import logging
import re
import signal
import time

import pytest
import redis

from tests import actors
from tests.helpers import wait_for
from tracebus.engine.keys import GROUP
from tracebus.redis_proc import RedisServer

NO_JANITOR = {"TRACEBUS_CLAIM_MIN_IDLE_MS": "60000"}


@pytest.fixture
def private_redis(tmp_path):
    # AOF as ``up`` runs it (everysec): a restart by SIGTERM still keeps the queue (Redis flushes
    # and fsyncs the AOF at shutdown), and no reply waits on an fsync in the event loop, as with
    # ``always``, where a write-heavy moment on the shared disk stalled a reply past 5 s.
    server = RedisServer(tmp_path / "redis", aof=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(private_redis) -> str:  # overrides conftest's: the supervisors use this server
    return private_redis.url


@pytest.fixture
def redis_client(private_redis):
    client = redis.Redis.from_url(private_redis.url)
    yield client
    client.close()


def _log_lines(sup, text: str) -> list[str]:
    """Lines whose message (after ``worker c:`` or ``supervisor:``) starts with ``text``."""
    return [line for line in sup.log().splitlines() if re.search(rf"(worker \S+|supervisor): {text}", line)]


def _consumer(client, prefix: str) -> str:
    return wait_for(lambda: [c.decode() for c in client.zrange(f"{prefix}:workers", 0, -1)], 10,
                    message="a worker in the registry")[0]


def test_entries_lost_with_the_connection_run_at_once_when_it_comes_back(supervisor, redis_client, private_redis):
    """The issue-12 case: XREADGROUP delivered entries whose reply was lost with the
    connection. They are pending for the worker, which never saw them; when its connection
    drops and comes back it requeues them itself, long before the minute of claim time."""
    pool = supervisor(processes=1, **NO_JANITOR)
    prefix = pool.broker.keys.prefix
    consumer = _consumer(redis_client, prefix)
    stream = pool.broker.keys.stream("tests")
    # The worker is registered before it first reads: only a worker blocked in XREADGROUP has
    # the connection whose loss it must notice (killed earlier, nothing of it would be lost).
    wait_for(lambda: any(c.get("cmd") == "xreadgroup" and "b" in c.get("flags", "")
                         for c in redis_client.client_list()), 10, message="the worker blocked in XREADGROUP")
    # Deliver two messages to the worker's consumer behind its back (as a lost reply would),
    # in one MULTI so that the worker, blocked in XREADGROUP, is not served them itself.
    pipe = redis_client.pipeline(transaction=True)
    for n in (1, 2):
        pipe.xadd(stream, {"m": actors.record.message((n,)).encode()})
    pipe.xreadgroup(GROUP, consumer, {stream: ">"}, count=10)
    got = pipe.execute()[-1]
    assert sum(len(entries) for _, entries in got) == 2
    # The kill comes from a one-off connection and the waits from a client opened after it: no
    # connection of the test's own can be one the kill closed (every normal one but the killer's).
    killer = redis.Redis.from_url(private_redis.url, single_connection_client=True)
    killed_at = time.monotonic()
    assert killer.client_kill_filter(_type="normal") >= 2  # at least the worker's and the supervisor's
    killer.close()
    watch = redis.Redis.from_url(private_redis.url, socket_timeout=30)
    pool.wait(lambda: watch.hlen(f"{prefix}:test:runs") == 2, 10, "the lost entries to run")
    assert time.monotonic() - killed_at < 5
    assert {k: int(v) for k, v in watch.hgetall(f"{prefix}:test:runs").items()} == {b"1": 1, b"2": 1}
    watch.close()
    pool.wait_queue()


def test_a_three_second_outage_costs_seconds_with_one_log_line_each_way(supervisor, private_redis):
    """Redis stops for 3 s while a message runs and writes to Redis: the worker backs off,
    and when Redis is back it requeues what it held; the message completes within 5 s of
    Redis returning. Each process logs the outage once and its end once, no traceback."""
    pool = supervisor(processes=1, **NO_JANITOR)
    prefix = pool.broker.keys.prefix
    client = redis.Redis.from_url(private_redis.url)
    actors.slow_record.send(1, 1.0)
    pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    client.close()
    private_redis.stop()
    time.sleep(3.0)
    private_redis.start()
    back_at = time.monotonic()
    client = redis.Redis.from_url(private_redis.url)
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 1), 10, "slow_record to complete")
    assert time.monotonic() - back_at < 5.0
    # a wait, not a bound (the bound is the message's 5 s above): each process logs the return
    # at its next retry, later on a loaded machine
    pool.wait(lambda: len(_log_lines(pool, "Redis back after")) >= 2, 15, "both processes to log the return")
    down = _log_lines(pool, "Redis unreachable")
    assert 2 <= len(down) <= 3, down  # the supervisor and the worker, once each (the API: none here)
    assert "Traceback" not in pool.log()
    client.close()


def test_stopping_while_redis_is_down_is_quiet(supervisor, private_redis):
    """SIGTERM while Redis is away: workers and supervisor exit without a traceback."""
    pool = supervisor(processes=2, **NO_JANITOR)
    private_redis.stop()
    time.sleep(1.0)
    pool.send_signal(signal.SIGTERM)
    assert pool.wait_exit(20) == 0
    log = pool.log()
    assert "Traceback" not in log, log[-3000:]
    assert len(_log_lines(pool, "Redis unreachable")) <= 3


def test_a_supervisor_started_before_redis_waits_for_it(supervisor, private_redis):
    """Redis down at start: the supervisor waits (one line), then boots when it answers."""
    private_redis.stop()
    pool = supervisor(processes=1, wait=False)
    pool.wait(lambda: _log_lines(pool, "Redis unreachable"), 15, "the supervisor to find Redis down")
    assert pool.process.poll() is None, pool.log()
    private_redis.start()
    pool.wait_workers(1, 15)
    actors.record.send(7)
    client = redis.Redis.from_url(private_redis.url)
    pool.wait(lambda: client.hget(f"{pool.broker.keys.prefix}:test:runs", 7), 10, "a message to run")
    client.close()
    assert len(_log_lines(pool, "Redis unreachable")) == 1


def test_the_api_logs_an_outage_once_and_its_end_once(private_redis, sample_db, caplog):
    """Many requests while Redis is down are 503s with one log line; the first answered
    request after it comes back logs its return, once."""
    import logging

    from falcon import testing

    from api.app import create_app
    from api.settings import ApiSettings
    from tracebus.engine.broker import Broker

    settings = ApiSettings.from_env({"REDIS_URL": private_redis.url, "TRACEBUS_SQLITE_PATH": str(sample_db),
                                     "TRACEBUS_RATE_LIMITS": "off"})
    broker = Broker(settings)
    app = testing.TestClient(create_app(settings, broker))
    job = "/api/trace/job/trace-evt-" + "0" * 24
    assert app.simulate_get(job, headers={"X-User-Id": "u"}).status_code == 404
    private_redis.stop()
    with caplog.at_level(logging.WARNING, logger="api.errors"):
        statuses = {app.simulate_get(job, headers={"X-User-Id": "u"}).status_code for _ in range(20)}
        private_redis.start()
        wait_for(lambda: app.simulate_get(job, headers={"X-User-Id": "u"}).status_code == 404, 15,
                 message="the API to answer again")
        app.simulate_get(job, headers={"X-User-Id": "u"})
    broker.close()
    assert statuses == {503}
    lines = [r.getMessage() for r in caplog.records if r.name == "api.errors"]
    assert len([m for m in lines if "Redis unreachable" in m]) == 1, lines
    assert len([m for m in lines if "Redis back after" in m]) == 1, lines


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_stale_connections_right_after_redis_returns_do_not_make_the_log_flap(caplog):
    from tracebus.engine.outage import Outage

    clock, log = Clock(), logging.getLogger("tests.outage")
    outage = Outage("worker w1", log, relapse_s=5.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="tests.outage"):
        outage.failed(ConnectionError("Error 111 connecting to 127.0.0.1:6380. Connection refused."))
        clock.now += 2
        outage.recovered()
        clock.now += 0.1  # another pooled connection meets the restart
        outage.failed(ConnectionError("Connection closed by server."))
        clock.now += 0.1
        outage.recovered()
        said = [r.getMessage() for r in caplog.records]
        assert said == ["worker w1: Redis unreachable: Error 111 connecting to 127.0.0.1:6380. Connection refused.",
                        "worker w1: Redis back after 2.0 s"]

        # a failure that lasts past the relapse window is a new outage, and said
        clock.now += 1
        outage.failed(ConnectionError("Connection closed by server."))
        clock.now += 6
        outage.failed(ConnectionError("Error 111 connecting"))
        clock.now += 1
        outage.recovered()
        assert [r.getMessage() for r in caplog.records][2:] == [
            "worker w1: Redis unreachable: Connection closed by server.", "worker w1: Redis back after 7.0 s"]
