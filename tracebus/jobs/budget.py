"""The Redis bytes each user may hold at once (``TRACE_USER_MAX_BYTES``): what their jobs and
answers store is charged before it is written, and refused past the budget.

Charged, each to its owner (a job, or an answer kept for the user) until it expires: a job's
stored params and inputs at submit, every result chunk and its columnar copy, partials and
artifacts as a unit writes them, and the lineage answers the trace application keeps. A chunk
shared by another job (a reused result) stays charged to the job that wrote it; the job that
reads it adds nothing to Redis and is charged nothing. An owner's bytes are forgotten when its
keys expire (its latest expiry: a job's TTL moves on while it runs), so the count can only be
above what Redis really holds, never under it. Concurrent writers check before writing, so a
user can pass the budget by at most what their in-flight units write at once (a chunk each).

Refused bytes raise :class:`BudgetExceeded`: a 429 at submit, and in a worker a failed job
(:class:`tracebus.jobs.middleware.JobUnits`), with the budget and what holds it in the message.
"""

from __future__ import annotations

import json
import time

import redis

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.errors import BudgetExceeded
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.scripts import script


def stored_bytes(spec, inputs) -> int:
    """What a new job stores before any unit runs: its packed inputs and its kind's fields
    (the request's params), the rest of its hash being a few hundred bytes."""
    return sum(map(len, inputs)) + len(json.dumps(spec.app, ensure_ascii=False).encode()) + 512


class Budget:
    """Charges and reads the users' budgets.

    Args:
        client(redis.Redis): the Redis of the jobs.
        keys(JobKeys): the key names.
        max_bytes(int): ``TRACE_USER_MAX_BYTES`` (0: charged, never refused).
    """

    def __init__(self, client: redis.Redis, keys: JobKeys, max_bytes: int):
        self.keys, self.max_bytes = keys, max_bytes
        self._spend = script(client, "user_spend")

    def _run(self, user: str, owner: str, nbytes: int, expires_ms: int) -> tuple[bool, int, int]:
        now_ms = int(time.time() * 1000)
        with redis_errors():
            ok, spent, earliest = self._spend(
                {"spent": self.keys.user_spent(user), "spent_until": self.keys.user_spent_until(user)},
                {"owner": owner, "bytes": nbytes, "expires_ms": expires_ms, "now_ms": now_ms,
                 "max_bytes": self.max_bytes})
        return bool(ok), int(spent), max(1, -(-(int(earliest) - now_ms) // 1000)) if earliest else 1

    def charge(self, user: str, owner: str, nbytes: int, expires_ms: int) -> int:
        """Charge ``nbytes`` that ``owner`` is about to store until ``expires_ms`` (unix ms).

        Returns:
            int: the user's bytes after the charge.

        Raises:
            BudgetExceeded: they would take the user past the budget (nothing is charged).
        """
        ok, spent, retry_s = self._run(user, owner, nbytes, expires_ms)
        if not ok:
            raise BudgetExceeded(
                f"user {user} holds {spent:,} bytes in Redis and {owner} needs {nbytes:,} more: past the "
                f"budget of {self.max_bytes:,} bytes per user (TRACE_USER_MAX_BYTES); it frees itself as "
                f"the user's results expire", retry_after_s=retry_s, spent_bytes=spent,
                max_bytes=self.max_bytes)
        return spent

    def spent(self, user: str) -> int:
        """The bytes charged to ``user`` that have not expired yet."""
        return self._run(user, "", 0, 0)[1]

    def check(self, user: str) -> None:
        """Refuse work whose answer would be stored when ``user`` already holds the budget.

        Raises:
            BudgetExceeded: the user's bytes reached the budget.
        """
        if not self.max_bytes:
            return
        ok, spent, retry_s = self._run(user, "", 0, 0)
        if spent >= self.max_bytes:
            raise BudgetExceeded(
                f"user {user} holds {spent:,} bytes in Redis, the budget per user (TRACE_USER_MAX_BYTES "
                f"{self.max_bytes:,}); it frees itself as the user's results expire",
                retry_after_s=retry_s, spent_bytes=spent, max_bytes=self.max_bytes)
