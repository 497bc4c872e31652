"""Retry decisions as pure functions: exponential backoff with jitter, and retry-or-give-up."""

from __future__ import annotations

import random

import pytest

from tracebus.engine.errors import Retry, TimeLimitExceeded
from tracebus.engine.middleware.retries import backoff_ms, decide


@pytest.mark.parametrize("retries, ceiling", [(0, 100), (1, 200), (2, 400), (3, 800), (5, 3200)])
def test_backoff_doubles_per_retry_and_stays_between_half_and_full_of_the_exponential_value(retries, ceiling):
    rng = random.Random(7)
    delays = [backoff_ms(retries, 100, 1_000_000, rng) for _ in range(200)]
    assert all(ceiling // 2 <= d <= ceiling for d in delays)


def test_backoff_is_capped_by_the_maximum_even_after_many_retries():
    rng = random.Random(1)
    for retries in (10, 32, 100, 10_000):
        assert 2_500 <= backoff_ms(retries, 1_000, 5_000, rng) <= 5_000


def test_backoff_jitter_spreads_a_burst_of_failures_instead_of_retrying_in_lockstep():
    rng = random.Random(3)
    delays = {backoff_ms(4, 1_000, 300_000, rng) for _ in range(50)}
    assert len(delays) > 25


def test_a_seeded_generator_makes_the_backoff_reproducible():
    assert backoff_ms(3, 50, 10_000, random.Random(42)) == backoff_ms(3, 50, 10_000, random.Random(42))


def test_a_failure_with_retries_left_is_retried_after_a_backoff():
    decision = decide(0, 3, 1_000, 300_000, RuntimeError("db blip"))
    assert decision.retry
    assert 500 <= decision.delay_ms <= 1_000


def test_a_failure_after_the_last_retry_gives_up_naming_the_error():
    decision = decide(3, 3, 1_000, 300_000, ValueError("bad row"))
    assert not decision.retry
    assert decision.reason == "gave up after 3 retries: ValueError: bad row"


def test_an_actor_without_retries_gives_up_at_the_first_failure():
    decision = decide(0, 0, 1_000, 300_000, TimeLimitExceeded("time limit exceeded"))
    assert not decision.retry
    assert "TimeLimitExceeded" in decision.reason


def test_a_retry_exception_may_choose_its_own_delay():
    assert decide(1, 3, 1_000, 300_000, Retry(delay_ms=12_345)).delay_ms == 12_345


def test_a_retry_exception_without_a_delay_uses_the_backoff():
    decision = decide(1, 3, 1_000, 300_000, Retry())
    assert decision.retry
    assert 1_000 <= decision.delay_ms <= 2_000


def test_a_retry_exception_still_respects_the_retry_limit():
    decision = decide(3, 3, 1_000, 300_000, Retry(delay_ms=10))
    assert not decision.retry
    assert "Retry" in decision.reason
