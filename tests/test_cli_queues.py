"""``tracebus queues``: list, pause/resume (honoured by real workers between messages), purge."""

from __future__ import annotations

import json
import time

import tests.actors as actors
from tests.clitools import run_cli
from tests.topology import ON_NODE_AND_CLUSTER


def env_of(pool) -> dict:
    return {"REDIS_URL": pool.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": pool.broker.keys.prefix}


def runs(pool) -> dict:
    raw = pool.broker.client.hgetall(f"{pool.broker.keys.prefix}:test:runs")
    return {k.decode(): int(v) for k, v in raw.items()}


def test_a_paused_queue_is_not_read_until_resumed(supervisor):
    pool = supervisor(processes=2)
    env = env_of(pool)
    result = run_cli("queues", "pause", "tests", env=env)
    assert result.code == 0 and "queue tests paused" in result.out, result.err
    actors.record.send_many([(f"m{i}",) for i in range(20)])  # at once: a pause holds from its answer on
    time.sleep(1.5)
    assert runs(pool) == {}
    listing = run_cli("queues", "list", "--json", env=env)
    row = next(r for r in json.loads(listing.out) if r["queue"] == "tests")
    assert row["paused"] is True and row["waiting"] == 20 and row["workers"] == 2
    assert run_cli("queues", "pause", "tests", env=env).out.strip() == "queue tests was already paused"
    status = run_cli("status", env=env)
    assert "tests (paused)" in status.out and json.loads(run_cli("status", "--json", env=env).out)["paused"] == [
        "tests"]

    result = run_cli("queues", "resume", "tests", env=env)
    assert result.code == 0 and "resumed" in result.out
    pool.wait(lambda: len(runs(pool)) == 20, 10, "all 20 run after resume")
    assert set(runs(pool).values()) == {1}


def test_a_message_sent_right_after_the_pause_is_held(supervisor):
    # It ran (issue 36): a worker read it in the XREADGROUP it was blocked in, and ran it with
    # the paused set it had read up to PAUSE_CHECK_S before. A marker sent after it, on a queue
    # the same worker also reads, runs; the held one must not have run before it.
    from tracebus.engine.message import Message

    pool = supervisor("--queues", "tests,other", processes=1)
    assert run_cli("queues", "pause", "tests", env=env_of(pool)).code == 0
    actors.record.send("held")
    pool.broker.enqueue(Message("other", "record", ("marker",)))
    pool.wait(lambda: "marker" in runs(pool), 10, "the marker on the other queue ran")
    assert runs(pool) == {"marker": 1}
    stats = pool.broker.queue_stats("tests")
    assert stats["length"] == 1 and stats["pending"] == 0  # given back, waiting for the resume
    assert run_cli("queues", "resume", "tests", env=env_of(pool)).code == 0
    pool.wait(lambda: runs(pool).get("held") == 1, 10, "the held one ran after the resume")


def test_a_pause_takes_effect_between_the_messages_of_a_batch(supervisor):
    pool = supervisor(processes=1)
    # each takes 0.3 s: the pause lands while the first ones run, the rest stay queued
    actors.slow_record.send_many([((f"s{i}", 0.3), {}) for i in range(10)])
    pool.wait(lambda: runs(pool), 10, "a first message ran")
    assert run_cli("queues", "pause", "tests", env=env_of(pool)).code == 0
    time.sleep(1.5)
    done = len(runs(pool))
    time.sleep(1.0)
    assert len(runs(pool)) == done < 10
    stats = pool.broker.queue_stats("tests")
    assert stats["length"] == 10 - done and stats["pending"] == 0  # unstarted ones were given back


@ON_NODE_AND_CLUSTER
def test_purge_deletes_waiting_and_delayed_but_not_running_messages(supervisor):
    pool = supervisor(processes=1)
    env = env_of(pool)
    actors.slow_record.send("running", 4.0)
    pool.wait(lambda: pool.broker.client.hget(f"{pool.broker.keys.prefix}:test:started", "running"), 10,
              "the slow message started")
    # Paused before the 5 are sent, so they stay waiting: paused after, a CLI that took longer to
    # start than the running message took to end let the worker take them (a loaded host).
    assert run_cli("queues", "pause", "tests", env=env).code == 0
    actors.record.send_many([(f"w{i}",) for i in range(5)])
    actors.record.send_with_options(args=("later",), delay=60_000)
    result = run_cli("queues", "purge", "tests", env=env)
    assert result.code == 0, result.err
    assert "5 waiting and 1 delayed messages deleted" in result.out
    pool.wait(lambda: runs(pool).get("running") == 1, 10, "the running one finished")
    run_cli("queues", "resume", "tests", env=env)
    pool.wait_queue()
    assert runs(pool) == {"running": 1}


def test_unknown_queue_is_one_line_and_exit_2(redis_url, redis_client):
    result = run_cli("queues", "purge", "nope", env={"REDIS_URL": redis_url})
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and "no queue named 'nope'" in result.err
