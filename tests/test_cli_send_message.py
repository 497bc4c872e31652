"""``tracebus send`` and ``tracebus message`` against real workers and the test Redis."""

from __future__ import annotations

import json

from tests.clitools import run_cli, run_cli_process
from tests.helpers import wait_for
from tracebus.engine.registry import WorkerRegistry


def env_of(pool) -> dict:
    return {"REDIS_URL": pool.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": pool.broker.keys.prefix}


def message(pool, message_id: str) -> dict:
    result = run_cli("message", message_id, "--json", env=env_of(pool))
    assert result.code == 0, result
    return json.loads(result.out)


def test_send_waits_for_a_result_and_message_shows_it(supervisor):
    pool = supervisor(processes=1)
    result = run_cli_process("send", "tests.actors:add", "2", "40", "--wait", env=env_of(pool))
    assert result.code == 0 and json.loads(result.out) == 42, result
    message_id = result.err.split()[1]
    doc = message(pool, message_id)
    assert doc["state"] == "done" and doc["result"] == 42
    text = run_cli("message", message_id, env=env_of(pool)).out
    assert "state     done" in text and "result    42" in text


def test_a_bare_actor_name_goes_to_queue_and_its_states_show(supervisor):
    pool = supervisor(processes=1)
    env = env_of(pool)
    # a bare name on a queue nothing declared: a typo, refused; no queue is left behind
    typo = run_cli("send", "record", '"n0"', "--queue", "nosuchqueue", env=env)
    assert typo.code == 2 and typo.err.count("\n") == 1 and "no queue 'nosuchqueue'" in typo.err, typo
    assert "nosuchqueue" not in pool.broker.queues()
    assert not pool.broker.client.exists(pool.broker.keys.stream("nosuchqueue"))
    # a bare name on a queue that exists but no worker reads: it waits there, and stderr says so
    pool.broker.declare_queue("nobody-reads")
    # the worker is forked before it registers: the message names what it reads once it has
    wait_for(lambda: any("tests" in (w.get("queues") or "").split(",") for w in WorkerRegistry(pool.broker).list()),
             10, message="the worker registered on queue tests")
    sent = run_cli("send", "record", '"n1"', "--queue", "nobody-reads", env=env)
    assert sent.code == 0, sent
    assert "no live worker reads queue nobody-reads (workers read: tests)" in sent.err, sent
    waiting = sent.out.strip()
    doc = message(pool, waiting)
    assert (doc["state"], doc["actor"], doc["queue"], doc["args"], doc["deliveries"]) == \
        ("queued", "record", "nobody-reads", ["n1"], 0)
    assert run_cli("message", waiting, "--queue", "tests", env=env).code == 1  # not in that queue

    delayed = run_cli("send", "tests.actors:record", '"n2"', "--delay", "60000", env=env).out.strip()
    assert message(pool, delayed)["state"] == "delayed"

    slow = run_cli("send", "tests.actors:slow_record", '"s"', "3", env=env).out.strip()
    doc = pool.wait(lambda: (d := message(pool, slow))["state"] == "running" and d, 10, "slow running")
    assert doc["deliveries"] == 1 and doc["consumer"]
    # record stores no result: once it ran, the message is nowhere
    ran = run_cli("send", "tests.actors:record", '"n3"', env=env).out.strip()
    pool.wait(lambda: run_cli("message", ran, env=env).code == 1, 10, "record ran")
    gone = run_cli("message", ran, env=env)
    assert gone.err.count("\n") == 1 and "not found" in gone.err


def test_a_failed_message_is_dead_with_its_error(supervisor):
    pool = supervisor(processes=1)
    result = run_cli_process("send", "tests.actors:fails_with_result", '"k"', "--wait", env=env_of(pool))
    assert result.code == 1 and result.out == ""
    assert result.err.splitlines()[-1].startswith("tracebus: message ") and "KeyError" in result.err
    message_id = result.err.split()[1]
    doc = pool.wait(lambda: (d := message(pool, message_id))["state"] == "dead" and d, 10, "dead")
    assert doc["error"]["type"] == "KeyError" and "gave up after 1 retries" in doc["reason"]


def test_bad_input_is_one_line_and_exit_2(redis_url, redis_client):
    env = {"REDIS_URL": redis_url}
    for argv, expected in ((("send", "tests.actors:add", "1", "x"), "argument 2 is not JSON"),
                           (("send", "tests.actors:add", "--kwargs", "[1]"), "--kwargs must be a JSON object"),
                           (("send", "tests.actors:add", "1", "--queue", "q"), "drop --queue"),
                           (("send", "no such"), "ACTOR must be module:name"),
                           (("send", "nomodule_xyz:f"), "cannot import 'nomodule_xyz'"),
                           (("send", "tests.actors:nope"), "declares no actor named 'nope'"),
                           (("message", "12345"), "not a message id")):
        result = run_cli(*argv, env=env)
        assert result.code == 2 and result.err.count("\n") == 1 and expected in result.err, (argv, result)
