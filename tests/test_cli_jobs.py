"""``tracebus jobs list|show|cancel|retry`` against the real test Redis, and the CLI's conventions:
``--help`` on every command, exit code 1 with a one-line message for an unknown job or an
unreachable Redis, exit code 2 for bad arguments, and never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.clitools import run_cli
from tracebus.cli import build_parser
from tracebus.trace.service import TraceService


@pytest.fixture
def env(settings):
    return {"REDIS_URL": settings.redis_url, "TRACEBUS_KEY_PREFIX": settings.key_prefix}


@pytest.fixture
def service(settings, broker):
    return TraceService(settings, broker)


def submit(service, user="alice", cids=3, domains=("history", "rejects")) -> str:
    req = service.parse({"profile": "query_tool", "container_ids": [f"C{user}{i:04d}" for i in range(cids)],
                         "domains": list(domains)}, user)
    return service.submit(req)


def every_command() -> list[list[str]]:
    """argv prefixes of every command and sub-action the parser knows."""
    import argparse

    out = []

    def walk(parser, prefix):
        out.append(prefix)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, prefix + [name])

    walk(build_parser(), [])
    return out


def test_every_command_and_action_has_help(env):
    commands = every_command()
    # Given the operator commands of the issue (and their actions)
    for expected in (["status"], ["jobs", "list"], ["jobs", "show"], ["jobs", "cancel"], ["jobs", "retry"],
                     ["dead", "list"], ["dead", "requeue"], ["dead", "purge"], ["submit"], ["fetch"]):
        assert expected in commands
    # Then each one answers --help with its usage and exit code 0
    for argv in commands:
        result = run_cli(*argv, "--help", env=env)
        assert result.code == 0, (argv, result)
        assert result.out.startswith("usage: tracebus"), (argv, result.out[:200])


def test_jobs_list_shows_every_users_jobs_with_filters(env, service):
    first, second = submit(service, "alice"), submit(service, "bob")
    result = run_cli("jobs", "list", env=env)
    assert result.code == 0, result
    assert first in result.out and second in result.out and "queued" in result.out

    page = json.loads(run_cli("jobs", "list", "--json", "--user", "bob", env=env).out)
    assert [j["job_id"] for j in page["jobs"]] == [second] and page["total"] == 1

    service.cancel(first)
    page = json.loads(run_cli("jobs", "list", "--json", "--status", "cancelled", env=env).out)
    assert [j["job_id"] for j in page["jobs"]] == [first]
    page = json.loads(run_cli("jobs", "list", "--json", "--limit", "1", env=env).out)
    assert len(page["jobs"]) == 1 and page["total"] == 2


def test_jobs_show_gives_progress_domains_and_units(env, service):
    job_id = submit(service, cids=3)
    result = run_cli("jobs", "show", job_id, "--units", env=env)
    assert result.code == 0, result
    assert f"job       {job_id}" in result.out
    assert "state     queued" in result.out
    assert "history" in result.out and "rejects" in result.out
    assert "0/2 units done" in result.out  # one chunk x two domains

    doc = json.loads(run_cli("jobs", "show", job_id, "--json", env=env).out)
    assert doc["job_id"] == job_id and len(doc["units"]) == 2
    assert [d["domain"] for d in doc["domain_states"]] == ["history", "rejects"]


def test_jobs_cancel_then_retry(env, service, broker, settings):
    job_id = submit(service)
    result = run_cli("jobs", "cancel", job_id, env=env)
    assert result.code == 0, result
    assert "cancelled" in result.out
    assert service.status(job_id)["state"] == "cancelled"

    # Cancelling twice is a state conflict: a message and exit code 1, no traceback
    again = run_cli("jobs", "cancel", job_id, env=env)
    assert again.code == 1
    assert "cannot cancel" in again.err and "Traceback" not in again.err

    sent_before = broker.queue_stats(settings.queue)["length"]
    result = run_cli("jobs", "retry", job_id, env=env)
    assert result.code == 0, result
    assert service.status(job_id)["state"] in ("queued", "running")
    # the retried units were sent to the queue again
    assert broker.queue_stats(settings.queue)["length"] > sent_before


@pytest.mark.parametrize("argv", [("jobs", "show"), ("jobs", "cancel"), ("jobs", "retry"), ("fetch",)])
def test_unknown_job_is_a_message_and_exit_1(env, argv):
    extra = ("--out", "/nonexistent/x.ndjson") if argv == ("fetch",) else ()
    result = run_cli(*argv, "trace-evt-000000000000", *extra, env=env)
    assert result.code == 1
    assert result.err.strip() == "tracebus: no job trace-evt-000000000000"


@pytest.mark.parametrize("argv", [
    ("jobs", "show"), ("jobs", "list", "--limit", "x"), ("jobs", "list", "--limit", "0"),
    ("jobs", "list", "--status", "bogus"), ("status", "--watch", "-1"), ("dead", "requeue"),
    ("dead", "purge", "1-0", "--all"), ("submit", "--profile", "query_tool"), ("fetch", "JOB"),
    ("no-such-command",),
])
def test_bad_arguments_exit_2_without_traceback(env, argv):
    result = run_cli(*argv, env=env)
    assert result.code == 2, result
    assert "Traceback" not in result.err and result.err.strip()


def test_unreachable_redis_is_one_line_and_exit_1():
    env = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    for argv in (("status",), ("jobs", "list"), ("dead", "list")):
        result = run_cli(*argv, env=env)
        assert result.code == 1, (argv, result)
        assert result.err.startswith("tracebus: ") and "unreachable" in result.err.lower()
        assert len(result.err.strip().splitlines()) == 1, result.err
