"""``tracebus dead list|requeue|purge`` against a real supervisor: dead letters are listed,
requeued at most once with a fresh set of retries (and then run), and purged."""

from __future__ import annotations

import json

import pytest

import tests.actors as actors
from tests.clitools import run_cli


@pytest.fixture
def running(supervisor):
    sup = supervisor(processes=1)
    env = {"REDIS_URL": sup.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": sup.broker.keys.prefix}
    return sup, env


def dead_records(env) -> list[dict]:
    result = run_cli("dead", "list", "--json", env=env)
    assert result.code == 0, result
    return json.loads(result.out)


def wait_dead(sup, env, count: int) -> list[dict]:
    return sup.wait(lambda: r if len(r := dead_records(env)) == count else None, timeout_s=15,
                    message=f"{count} dead letters")


def runs(sup, n) -> int:
    return int(sup.broker.client.hget(f"{sup.broker.keys.prefix}:test:runs", n) or 0)


def test_dead_list_names_actor_args_and_reason(running):
    sup, env = running
    actors.always_fails.send(2)
    actors.flaky.send(1, 4)  # fails 4 times: more than its 3 retries
    records = wait_dead(sup, env, 2)
    by_actor = {r["actor"]: r for r in records}
    assert by_actor["always_fails"]["args"] == [2] and by_actor["always_fails"]["queue"] == "tests"
    assert "ValueError: broken message 2" in by_actor["always_fails"]["reason"]
    assert by_actor["flaky"]["retries"] == 3 and "planned failure 4" in by_actor["flaky"]["reason"]
    # each was delivered (its last attempt at least): the record says so, not 0
    assert all(r["deliveries"] >= 1 for r in records), records

    text = run_cli("dead", "list", env=env).out
    for r in records:
        assert r["id"] in text and r["actor"] in text
    assert "gave up after 3 retries" in text


def test_dead_requeue_runs_the_message_again_with_fresh_retries_once(running):
    sup, env = running
    # Given a message that failed past its retries (attempts 1-4) and needs two more tries
    actors.flaky.send(5, 5)
    [record] = wait_dead(sup, env, 1)

    # When the operator requeues it
    result = run_cli("dead", "requeue", record["id"], env=env)
    assert result.code == 0, result
    assert f"{record['id']}: requeued on tests as " in result.out

    # Then it runs again with a full set of retries: attempt 5 fails, attempt 6 succeeds
    sup.wait(lambda: runs(sup, 5) == 1, timeout_s=15, message="the requeued message ran")
    assert int(sup.broker.client.hget(f"{sup.broker.keys.prefix}:test:attempts", 5)) == 6
    assert dead_records(env) == []
    # And its dead record is gone: a second requeue finds nothing and says so
    again = run_cli("dead", "requeue", record["id"], env=env)
    assert again.code == 1
    assert f"{record['id']}: not requeued: no such dead record" in again.err


def test_dead_requeue_all_and_at_most_once(running):
    sup, env = running
    actors.always_fails.send(1)
    actors.always_fails.send(2)
    first = {r["id"] for r in wait_dead(sup, env, 2)}
    # The broker requeues each record at most once, even when asked twice
    some_id = sorted(first)[0]
    twice = sup.broker.requeue_dead("tests", [some_id, some_id])
    assert "requeued_as" in twice[0] and twice[1] == {"id": some_id, "skipped": "missing"}
    # (always_fails fails again at once: two dead records again, one of them new)
    second = sup.wait(lambda: ids if len(ids := {r["id"] for r in dead_records(env)}) == 2
                      and ids != first else None, timeout_s=15, message="re-dead-lettered")

    result = run_cli("dead", "requeue", "--all", "--queue", "tests", env=env)
    assert result.code == 0, result
    assert sorted(line.split(":")[0] for line in result.out.strip().splitlines()) == sorted(second)
    # Both fail again and are dead again, under new record ids
    sup.wait(lambda: len(ids := {r["id"] for r in dead_records(env)}) == 2 and not ids & second,
             timeout_s=15, message="dead again, under new ids")


def test_dead_purge_ids_and_all(running):
    sup, env = running
    for n in range(3):
        actors.always_fails.send(n)
    ids = [r["id"] for r in wait_dead(sup, env, 3)]

    result = run_cli("dead", "purge", ids[0], env=env)
    assert result.code == 0 and "1 dead-letter record(s) deleted" in result.out
    missing = run_cli("dead", "purge", ids[0], env=env)
    assert missing.code == 1 and f"no such dead record: {ids[0]}" in missing.err

    result = run_cli("dead", "purge", "--all", env=env)
    assert result.code == 0 and "2 dead-letter record(s) deleted" in result.out
    assert dead_records(env) == []
    assert sup.broker.queue_stats("tests")["dead"] == 0
