"""Lineage answers kept by ``query_id``, so the events stage can find the lineage stage's.

The MSD page calls ``POST /api/trace/lineage`` first and passes the answer's ``query_id`` to
``POST /api/trace/events`` as ``lineage_query_id`` (MSD.md section 7). The lineage answer
(:meth:`BackwardLineage.to_dict` / :meth:`ForwardLineage.to_dict` plus ``direction`` and
``seeds``) is stored here as msgpack with the job TTL; a miss (expired, or never stored)
means the events stage recomputes the lineage from the source. Each stored answer is charged
to the budget of the user who asked (``TRACE_USER_MAX_BYTES``, :mod:`tracebus.jobs.budget`);
past it the answer is given but not kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time

import msgpack
import redis

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.budget import Budget
from tracebus.jobs.errors import BudgetExceeded
from tracebus.jobs.keys import JobKeys
from tracebus.trace import pieces
from tracebus.trace.keys import TraceKeys

log = logging.getLogger(__name__)

#: The shape of every :func:`lineage_query_id`; a request's value of another shape is never a key.
LINEAGE_QUERY_ID = re.compile(r"lin-[0-9a-f]{16}")


def lineage_query_id(direction: str, seeds: list[str], tree: str | None = None) -> str:
    """The ``query_id`` of a lineage request: ``lin-`` + 16 hex of its direction and seed set,
    and of ``tree`` (the query-tool profile) for the query-tool trees, which are other answers
    than the MSD lineage of the same seeds."""
    identity = {"direction": direction, "seeds": sorted(set(seeds))}
    if tree is not None:
        identity["tree"] = tree
    body = json.dumps(identity, separators=(",", ":"))
    return "lin-" + hashlib.sha256(body.encode()).hexdigest()[:16]


def pack(answer: dict) -> bytes:
    """A lineage answer as stored (msgpack, packed in pieces: :mod:`tracebus.trace.pieces`)."""
    return pieces.msgpack_bytes(answer)


def unpack(raw: bytes) -> dict:
    """A stored lineage answer."""
    return pieces.msgpack_value(raw)


class LineageCache:
    """Stores and reads lineage answers.

    Args:
        client(redis.Redis): the Redis of the jobs.
        prefix(str): the key prefix.
        ttl_s(int): how long an answer is kept.
        max_bytes(int): the budget per user (``TRACE_USER_MAX_BYTES``; 0: none).
    """

    def __init__(self, client: redis.Redis, prefix: str, ttl_s: int, max_bytes: int = 0):
        self.client, self.keys, self.ttl_s = client, TraceKeys(prefix), ttl_s
        self.budget = Budget(client, JobKeys(prefix), max_bytes)

    def put(self, query_id: str, answer: dict | bytes, user: str | None = None) -> bool:
        """Keep ``answer`` (or its :func:`pack` ed bytes, packed by the caller off the API's loop)
        under ``query_id``, charged to ``user``'s budget (None: to nobody).

        Returns:
            bool: False when the budget refused it (nothing stored).
        """
        packed = answer if isinstance(answer, bytes) else pack(answer)
        if user is not None:
            try:
                self.budget.charge(user, f"lineage:{query_id}", len(packed),
                                   int(time.time() * 1000) + self.ttl_s * 1000)
            except BudgetExceeded as e:
                log.info("lineage %s not kept: %s", query_id, e)
                return False
        with redis_errors():
            self.client.set(self.keys.lineage(query_id), packed, ex=self.ttl_s)
        return True

    def get_packed(self, query_id: str) -> bytes | None:
        """The stored answer as bytes (:func:`unpack` them), or None as :meth:`get`."""
        if not isinstance(query_id, str) or not LINEAGE_QUERY_ID.fullmatch(query_id):
            return None
        with redis_errors():
            return self.client.get(self.keys.lineage(query_id))

    def get(self, query_id: str) -> dict | None:
        """The stored answer, or None when it expired, was never stored or cannot be an id of ours."""
        if not isinstance(query_id, str) or not LINEAGE_QUERY_ID.fullmatch(query_id):
            return None
        with redis_errors():
            raw = self.client.get(self.keys.lineage(query_id))
        return None if raw is None else msgpack.unpackb(raw, raw=False, strict_map_key=False)
