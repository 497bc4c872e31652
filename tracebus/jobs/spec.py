"""What a job kind submits: the generic description of a job (pure data, no Redis).

An application turns its request into a :class:`JobSpec`: the sections its results are
grouped in (the trace application's domains), the input split into item chunks (its CID
lists, one per unit of each section), who asks, where and by which actor the units run,
the single-flight fingerprint, the result key that lets an identical request reuse its
completed result, and the fields of its own it wants back in the status
(``app``). The job layer stores and schedules it without knowing what the items are.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import msgpack

from tracebus.jobs.units import UnitPlan
from tracebus.jobs.states import JobState


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job to admit.

    Attributes:
        kind(str): the job kind; also the prefix of its ids (``<kind>-<24 hex>``).
        user(str): who asked (quota, single-flight, listing).
        sections(tuple[str, ...]): result sections, in order; every section has one unit
            per item chunk.
        items(list): the job's input items (e.g. container ids), already normalised.
        chunk_items(int): items per unit.
        queue(str): the queue the units are sent to.
        actor_name(str): the actor that runs one unit (called with ``(job_id, unit)``).
        fingerprint(str): identical in-flight requests share one job ("" turns it off).
        result_key(str): what makes two requests the same for reuse (the kind's fingerprint:
            kind, normalised request, source, and the user when the answer depends on the
            caller): a request whose key names a completed result still alive and younger than
            ``TRACE_RESULT_REUSE_MAX_AGE_S`` is answered from it ("" turns reuse off).
        fresh(bool): run the query again even when a result could be reused (``no-cache``).
        app(dict): JSON-serialisable fields of the kind, returned in the status as ``app``.
        stages(tuple[int, ...]): sections per stage, in order (empty: one stage). No unit of
            a stage starts before every unit of the stages before it settled, so a stage can
            read what the one before left (partials, artifacts).
    """

    kind: str
    user: str
    sections: tuple[str, ...]
    items: list
    chunk_items: int
    queue: str
    actor_name: str
    fingerprint: str = ""
    result_key: str = ""
    fresh: bool = False
    app: dict = field(default_factory=dict)
    stages: tuple[int, ...] = ()

    @property
    def plan(self) -> UnitPlan:
        return UnitPlan(self.sections, len(self.items), self.chunk_items)

    def packed_inputs(self) -> list[bytes]:
        """One msgpack value per item chunk, in chunk order."""
        plan = self.plan
        return [msgpack.packb(self.items[plan.item_slice(c)]) for c in range(plan.n_chunks)]

    def hash_fields(self, job_id: str, now_ms: int) -> dict[str, object]:
        """The fields of the new job hash (spec, plan and zeroed counters)."""
        plan = self.plan
        return {
            "job_id": job_id, "kind": self.kind, "user": self.user, "queue": self.queue,
            "actor": self.actor_name, "sections": json.dumps(list(self.sections), ensure_ascii=False),
            "items": plan.n_items, "chunk_items": plan.chunk_items, "n_chunks": plan.n_chunks,
            "n_sections": len(plan.sections), "units_total": plan.total,
            "fingerprint": self.fingerprint, "result_key": self.result_key, "fresh": int(self.fresh),
            "app": json.dumps(self.app, ensure_ascii=False, sort_keys=True),
            "created_ms": now_ms, "status": JobState.QUEUED.value, "units_done": 0, "units_failed": 0,
            "units_cancelled": 0, "inflight": 0, "rows": 0, "error": "",
            "gates": ",".join(str(g * plan.n_chunks) for g in self.stage_boundaries()),
        }

    def stage_boundaries(self) -> list[int]:
        """Section indexes where a stage starts (the first excluded)."""
        if self.stages and sum(self.stages) != len(self.sections):
            raise ValueError(f"stages {self.stages} do not add up to {len(self.sections)} sections")
        bounds, at = [], 0
        for n in self.stages[:-1]:
            at += n
            bounds.append(at)
        return bounds


def fingerprint_of(*parts) -> str:
    """sha256 hex of the JSON of ``parts`` (keys sorted): a single-flight fingerprint."""
    body = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
