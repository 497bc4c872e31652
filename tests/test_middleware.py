"""Middleware: the stack a worker runs, and middleware installed from outside the worker loop."""

from __future__ import annotations

import pytest

from tests import actors
from tests.clitools import run_cli
from tracebus.engine import middleware
from tracebus.engine.middleware import Middleware, build_stack, declare, load
from tracebus.engine.middleware.results import Results
from tracebus.engine.middleware.retries import Retries
from tracebus.engine.middleware.time_limit import TimeLimit
from tracebus.errors import ConfigError


def test_the_default_stack_ends_with_results_retries_then_the_time_limit_innermost():
    stack = build_stack(["tests.actors:Audit"])
    assert [type(m) for m in stack[-4:]] == [actors.Audit, Results, Retries, TimeLimit]


def test_a_declared_middleware_is_installed_once_before_the_named_ones():
    class Declared(Middleware):
        pass

    declare(Declared)
    declare(Declared)
    try:
        stack = build_stack(["tests.actors:Audit"])
    finally:
        middleware._declared.remove(Declared)  # the registry is process-wide
    assert sum(isinstance(m, Declared) for m in stack) == 1
    assert stack.index(next(m for m in stack if isinstance(m, Declared))) < stack.index(
        next(m for m in stack if isinstance(m, actors.Audit)))


@pytest.mark.parametrize("spec", ["tests.actors", "tests.actors:Nope", "no.such.module:X", "tests.actors:record"])
def test_a_bad_middleware_spec_is_a_config_error_that_names_it(spec):
    with pytest.raises(ConfigError, match="middleware"):
        load(spec)


def test_the_worker_command_refuses_a_bad_middleware_with_one_line(redis_url):
    result = run_cli("worker", "tests.actors", "--middleware", "tests.actors:Nope",
                     env={"REDIS_URL": redis_url})
    assert result.code == 2 and result.err.count("\n") == 1 and "tests.actors:Nope" in result.err


def test_middleware_named_on_the_command_line_runs_in_every_forked_worker(supervisor):
    # Given a pool started with --middleware
    pool = supervisor("--middleware", "tests.actors:Audit", processes=2)
    # When messages run, one of them failing for good
    for n in range(6):
        actors.record.send(n)
    actors.always_fails.send(99)
    # Then the middleware saw each run in the workers, and the worker loop still settled them
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    pool.wait(lambda: client.hget(f"{prefix}:test:audit", "record:ok") == b"6"
              and client.hget(f"{prefix}:test:audit", "always_fails:error") == b"1", 10, "audited runs")
    pool.wait(lambda: pool.broker.queue_stats("tests")["dead"] == 1, 10, "the failure dead-lettered")
