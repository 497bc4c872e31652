"""The Redis bytes each user may hold at once (``TRACE_USER_MAX_BYTES``): what their jobs and
answers store is charged before it is written, and refused past the budget.

Charged, each to its owner (a job, or an answer kept for the user) until it expires: a job's
stored params and inputs and its control keys at submit (:func:`stored_bytes`), every result
chunk and its columnar copy, partials and artifacts as a unit writes them, what a kind stores
under keys of its own through :meth:`~tracebus.jobs.outputs.JobOutputs.charge` (the MSD job's
per-CID hashes, detail rows and orderings), and the lineage answers the trace application
keeps. Not charged: the rows of the one DW_MES_JOB read of a trace, held only until their
units write them as chunks (which are charged).

A result reused by another request (:mod:`tracebus.jobs.reuse`) stays charged to the user
whose job wrote it until its first expiry, and the reuse, which keeps its chunks a full TTL
longer, charges their bytes to the user who reused it (once per result: a second reuse only
moves the expiry); a user past the budget is refused the reuse as they would be the run. A
join (an identical request in flight) keeps nothing alive and is charged nothing.

An owner's bytes are forgotten when its keys expire (its latest expiry: a job's TTL moves on
while it runs). Writers check before writing, so a user passes the budget by at most what
their units in flight write at once (a chunk each).

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


#: What Redis spends on a job beside its outputs and inputs (its hash, progress stream, units
#: hash, manifests; MEMORY USAGE of a 201-CID trace of 15 units: 11 KB), as a base and per unit.
JOB_BYTES, UNIT_BYTES = 4096, 512
#: What Redis spends on a key beside its value (name, object header, dict entry).
KEY_BYTES = 96
#: What Redis spends on a hash field beside its name and value.
FIELD_BYTES = 24


def stored_bytes(spec, inputs) -> int:
    """What a new job costs Redis before any unit runs: its packed inputs, its kind's fields
    (the request's params) and its control keys (:data:`JOB_BYTES`, :data:`UNIT_BYTES`)."""
    return (sum(len(i) + KEY_BYTES for i in inputs) + len(json.dumps(spec.app, ensure_ascii=False).encode())
            + JOB_BYTES + UNIT_BYTES * spec.plan.total)


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

    def _run(self, user: str, owner: str, nbytes: int, expires_ms: int, keep: bool = False) -> tuple[bool, int, int]:
        now_ms = int(time.time() * 1000)
        with redis_errors():
            ok, spent, earliest = self._spend(
                {"spent": self.keys.user_spent(user), "spent_until": self.keys.user_spent_until(user)},
                {"owner": owner, "bytes": nbytes, "expires_ms": expires_ms, "now_ms": now_ms,
                 "max_bytes": self.max_bytes, "mode": "keep" if keep else "add"})
        return bool(ok), int(spent), max(1, -(-(int(earliest) - now_ms) // 1000)) if earliest else 1

    def charge(self, user: str, owner: str, nbytes: int, expires_ms: int, keep: bool = False) -> int:
        """Charge ``nbytes`` that ``owner`` is about to store until ``expires_ms`` (unix ms);
        with ``keep``, ``nbytes`` are what ``owner`` holds in all (charged once: a second charge
        of the same bytes only moves their expiry).

        Returns:
            int: the user's bytes after the charge.

        Raises:
            BudgetExceeded: they would take the user past the budget (nothing is charged).
        """
        ok, spent, retry_s = self._run(user, owner, nbytes, expires_ms, keep)
        if not ok:
            raise BudgetExceeded(
                f"user {user} holds {spent:,} bytes in Redis and {owner} needs {nbytes:,} more: past the "
                f"budget of {self.max_bytes:,} bytes per user (TRACE_USER_MAX_BYTES); it frees itself as "
                f"the user's results expire", retry_after_s=retry_s, spent_bytes=spent,
                max_bytes=self.max_bytes)
        return spent

    @staticmethod
    def expires_in(ttl_s: int) -> int:
        """The expiry (unix ms, the real clock, as Redis's TTLs) of bytes stored now for ``ttl_s``."""
        return int(time.time() * 1000) + ttl_s * 1000

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
        _, spent, retry_s = self._run(user, "", 0, 0)
        if spent >= self.max_bytes:
            raise BudgetExceeded(
                f"user {user} holds {spent:,} bytes in Redis, the budget per user (TRACE_USER_MAX_BYTES "
                f"{self.max_bytes:,}); it frees itself as the user's results expire",
                retry_after_s=retry_s, spent_bytes=spent, max_bytes=self.max_bytes)
