"""The per-user Redis budget (TRACE_USER_MAX_BYTES, tracebus/jobs/budget.py) on a real Redis:
charges add up per user, past the budget nothing is charged and the error says why, an owner
is forgotten once its bytes expire, a kept owner is charged once, and every key expires."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_for
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.budget import Budget
from tracebus.jobs.errors import BudgetExceeded
from tracebus.jobs.keys import JobKeys


@pytest.fixture
def budget(redis_client, settings):
    return Budget(redis_client, JobKeys(settings.key_prefix), 10_000)


def _later(s: float) -> int:
    return int((time.time() + s) * 1000)


@ON_NODE_AND_CLUSTER
def test_charges_add_up_per_user_and_are_refused_past_the_budget(budget):
    assert budget.charge("ann", "job-1", 4_000, _later(60)) == 4_000
    assert budget.charge("ann", "job-1", 3_000, _later(60)) == 7_000
    assert budget.charge("ann", "job-2", 3_000, _later(60)) == 10_000
    assert budget.charge("ben", "job-3", 9_000, _later(60)) == 9_000  # users apart
    with pytest.raises(BudgetExceeded) as refused:
        budget.charge("ann", "job-2", 1, _later(60))
    assert "TRACE_USER_MAX_BYTES" in refused.value.message and refused.value.code == "BUDGET_EXCEEDED"
    assert 1 <= refused.value.retry_after_s <= 60
    assert budget.spent("ann") == 10_000  # nothing charged by the refusal
    with pytest.raises(BudgetExceeded):
        budget.check("ann")
    budget.check("ben")


def test_an_owner_is_forgotten_once_its_bytes_expire_and_the_keys_expire_with_the_last(
        budget, redis_client, settings):
    budget.charge("cy", "short", 6_000, _later(2))
    budget.charge("cy", "long", 1_000, _later(60))
    with pytest.raises(BudgetExceeded):
        budget.charge("cy", "more", 5_000, _later(60))
    wait_for(lambda: budget.spent("cy") == 1_000, 10, interval_s=0.1, message="the short owner to be forgotten")
    assert budget.charge("cy", "more", 5_000, _later(60)) == 6_000
    keys = JobKeys(settings.key_prefix)
    for key in (keys.user_spent("cy"), keys.user_spent_until("cy")):
        assert 55_000 < redis_client.pttl(key) <= 60_000


def test_a_kept_owner_is_charged_once_and_then_only_what_it_adds(budget):
    assert budget.charge("di", "reuse:x", 3_000, _later(60), keep=True) == 3_000
    assert budget.charge("di", "reuse:x", 3_000, _later(90), keep=True) == 3_000
    assert budget.charge("di", "reuse:x", 3_500, _later(90), keep=True) == 3_500


def test_thousands_of_owners_are_counted_without_reading_each(budget, redis_client, settings):
    big = Budget(redis_client, JobKeys(settings.key_prefix), 0)  # no budget: charged, never refused
    for n in range(3_000):
        big.charge("ed", f"lineage:{n}", 100, _later(60 if n % 2 else 0.2))
    wait_for(lambda: big.spent("ed") == 150_000, 5, message="the 1,500 short owners to be forgotten")
    assert redis_client.hlen(JobKeys(settings.key_prefix).user_spent("ed")) == 1_501  # and #total
