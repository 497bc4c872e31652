"""Periodic jobs: ``@actor(schedule=...)`` and schedule files, with two real supervisors on one
Redis: every tick runs exactly once between them (a SET NX lock per tick)."""

from __future__ import annotations

import re

import pytest

from tests.clitools import run_cli_process
from tracebus import actor
from tracebus.errors import ConfigError

MODULES = ("tests.periodic_actors",)


def counts(broker, name: str) -> dict[int, int]:
    raw = broker.client.hgetall(f"{broker.keys.prefix}:test:{name}")
    return {int(k): int(v) for k, v in raw.items()}


def assert_each_tick_once(found: dict[int, int], at_least: int) -> None:
    assert len(found) >= at_least, found
    assert set(found.values()) == {1}, f"a tick ran more than once: {found}"
    ticks = sorted(found)
    assert ticks == list(range(ticks[0], ticks[-1] + 1)), f"a tick was skipped: {ticks}"


def test_two_supervisors_run_each_tick_once(supervisor, tmp_path):
    schedule = tmp_path / "schedule"
    schedule.write_text("# every second, with an argument\n"
                        '* * * * * *  from_file ["a"]\n'
                        '@yearly from_file ["never"]\n')
    first = supervisor("--schedule", str(schedule), processes=1, modules=MODULES, TRACEBUS_LOG_LEVEL="debug")
    second = supervisor(processes=1, modules=MODULES, TRACEBUS_SCHEDULE_FILE=str(schedule),
                        TRACEBUS_LOG_LEVEL="debug")
    broker = first.broker

    def contended() -> bool:  # three ticks of each schedule ran, and the lock turned one away twice
        logs = first.log() + second.log()
        return (len(counts(broker, "ticks")) >= 3 and len(counts(broker, "file:a")) >= 3
                and len(re.findall(r"schedule every_second: tick \S+ already sent by another", logs)) >= 2)

    first.wait(contended, 20, "three ticks run and two turned away by the lock")
    assert_each_tick_once(counts(broker, "ticks"), at_least=3)
    # both supervisors contended for the ticks: the lock turned one of them away, and no tick
    # was sent by both
    logs = first.log() + second.log()
    sent = re.findall(r"schedule every_second: tick (\S+) sent", logs)
    assert len(sent) == len(set(sent)) >= 3
    assert len(re.findall(r"schedule every_second: tick \S+ already sent by another", logs)) >= 2
    assert_each_tick_once(counts(broker, "file:a"), at_least=3)
    assert counts(broker, "file:never") == {}
    locks = broker.client.keys(f"{broker.keys.prefix}:sched:*")
    assert locks and all(0 < broker.client.ttl(k) <= 60 for k in locks)  # every lock expires


def test_a_bad_schedule_is_one_line_and_exit_2(tmp_path, redis_url):
    bad = tmp_path / "schedule"
    for content, expected in (("*/5 * * *  from_file\n", "expected CRON ACTOR"),
                              ("61 * * * *  from_file\n", "is not a cron expression"),
                              ("* * * * *  nobody\n", "no actor named 'nobody'"),
                              ('* * * * *  from_file {"a": 1}\n', "must be a JSON array")):
        bad.write_text(content)
        result = run_cli_process("worker", *MODULES, "--schedule", str(bad), env={"REDIS_URL": redis_url})
        assert result.code == 2, (content, result)
        assert result.err.count("\n") == 1 and expected in result.err and "line 1" in result.err


def test_an_actor_with_a_bad_schedule_is_refused():
    with pytest.raises(ConfigError, match="not a cron expression"):
        @actor(schedule="every five minutes")
        def nope():
            pass
