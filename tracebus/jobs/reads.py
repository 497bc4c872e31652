"""Read side of :class:`tracebus.jobs.store.JobStore`: status, detail, listing, progress, inputs.

A mixin so the store stays one object for its callers while each module keeps one
job: this one only reads (the rendering itself is in :mod:`tracebus.jobs.view`).
It expects ``redis``, ``keys`` and ``clock`` attributes on the instance.
"""

from __future__ import annotations

import json

import msgpack

from tracebus.jobs.errors import JobNotFound
from tracebus.jobs.ids import check_job_id
from tracebus.jobs import view
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.states import ACTIVE_STATES
from tracebus.jobs.units import UnitPlan


class JobReads:
    """Reads of job state (mixed into ``JobStore``)."""

    #: (job, unit, packed input) that begin_unit's script read with the attempt, for load_input.
    _begun_input: tuple | None = None

    def status(self, job_id: str) -> dict:
        """The generic status document of a job (see :func:`view.render_status`).

        Raises:
            JobNotFound: unknown (or expired) job.
        """
        return view.render_status(self._job_hash(job_id), self.clock())

    def detail(self, job_id: str) -> dict:
        """The status plus ``section_states`` and per-unit ``units`` (``GET /api/v1/jobs/{id}``).

        Raises:
            JobNotFound: unknown (or expired) job.
        """
        job = self._job_hash(job_id)
        with redis_errors():
            raw = self.redis.hgetall(self.keys.job_units(self.data_id(job_id)))
        units = {int(u): msgpack.unpackb(v) for u, v in raw.items()}
        doc = view.render_status(job, self.clock())
        doc["section_states"], doc["units"] = view.render_units(view.plan_of(job), units)
        return doc

    def list_jobs(self, user: str | None = None, status: str | None = None,
                  offset: int = 0, limit: int = 50) -> dict:
        """Jobs newest first, optionally filtered by user and status (public or internal).

        Returns:
            dict: ``jobs`` (status documents), ``total`` (matches), ``offset``, ``limit``.
        """
        with redis_errors():
            ids = self.redis.zrevrange(self.keys.jobs_index(), 0, -1)
            pipe = self.redis.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(self.keys.job(job_id.decode()))
            hashes = pipe.execute()
        now, matches = self.clock(), []
        for raw in hashes:
            if not raw:
                continue  # expired; _prune_index removes it from the index eventually
            job = view.decode_hash(raw)
            if user is not None and job["user"] != user:
                continue
            job = self._following(job)
            doc = view.render_status(job, now)
            if status is not None and status != doc["status"]:
                continue
            matches.append(doc)
        return {"jobs": matches[offset:offset + limit], "total": len(matches),
                "offset": offset, "limit": limit}

    def read_progress(self, job_id: str, last_id: str = "0-0", block_ms: int | None = None,
                      count: int = 100) -> list[tuple[str, dict[str, str]]]:
        """Progress events after ``last_id`` (for an SSE endpoint), waiting up to ``block_ms``.

        Returns:
            list[tuple[str, dict[str, str]]]: (event id, fields) in order; [] on timeout.
        """
        check_job_id(job_id)
        with redis_errors():
            reply = self.redis.xread({self.keys.job_progress(job_id): last_id}, count=count,
                                     block=block_ms)
        if not reply:
            return []
        return [(eid.decode(), view.decode_hash(fields)) for eid, fields in reply[0][1]]

    def load_input(self, job_id: str, unit: int):
        """The input of ``unit``: its item chunk (one HGET: O(chunk), not O(job)).

        Raises:
            JobNotFound: the job or its inputs expired.
        """
        begun, self._begun_input = self._begun_input, None
        if begun is not None and begun[:2] == (job_id, unit):  # read by begin_unit's script just now
            return msgpack.unpackb(begun[2])
        plan = self._fixed_fields(job_id)[2]
        with redis_errors():
            packed = self.redis.hget(self.keys.job_inputs(self.data_id(job_id)), plan.chunk_of(unit))
        if packed is None:
            raise JobNotFound(f"no inputs stored for job {job_id}")
        return msgpack.unpackb(packed)

    def plan(self, job_id: str) -> UnitPlan:
        """The job's unit plan (sections, item count, items per unit)."""
        return self._fixed_fields(job_id)[2]

    def user_of(self, job_id: str) -> str:
        """Who submitted the job (whose budget its outputs are charged to)."""
        return self._fixed_fields(job_id)[0]

    def route(self, job_id: str) -> tuple[str, str]:
        """(queue, actor name) of the job's units."""
        return self._fixed_fields(job_id)[3]

    def app(self, job_id: str) -> dict:
        """The fields the job's kind stored at submit (``app`` of the status): never changed, so
        cached per process beside the fixed fields."""
        app = self._fixed.get(("app", job_id))
        if app is None:
            if len(self._fixed) >= 1024:
                self._fixed.clear()
            app = self._fixed[("app", job_id)] = json.loads(self._job_hash(job_id).get("app") or "{}")
        return app

    def data_id(self, job_id: str) -> str:
        """The job whose keys hold ``job_id``'s outputs: itself, or for a job answered from a
        reused result the job that ran it (:mod:`tracebus.jobs.reuse`). Key names only: never
        shown to a caller (another user's job). Fixed per job, so cached per process."""
        data = self._fixed.get(("data", job_id))
        if data is None:
            if len(self._fixed) >= 1024:
                self._fixed.clear()
            data = self._fixed[("data", job_id)] = self._job_hash(job_id).get("data_of") or job_id
        return data

    def units_by_section(self, job_id: str) -> dict[str, list[int]]:
        """Each section's units in result order (for ``results.page`` and ``ndjson.stream``)."""
        plan = self.plan(job_id)
        return {d: plan.units_of(d) for d in plan.sections}

    def _job_hash(self, job_id: str) -> dict[str, str]:
        check_job_id(job_id)  # before it becomes a key: "<id>:progress" is another job key
        with redis_errors():
            raw = self.redis.hgetall(self.keys.job(job_id))
        if not raw:
            raise JobNotFound(f"no job {job_id}")
        return self._following(view.decode_hash(raw))

    def _following(self, job: dict[str, str]) -> dict[str, str]:
        """A job that joined another user's identical job in flight (:mod:`tracebus.jobs.reuse`)
        shows that job's live state (status, counters, times) until it is ended with it."""
        if not job.get("joined") or job.get("status") not in ACTIVE_STATES:
            return job
        with redis_errors():
            raw = self.redis.hgetall(self.keys.job(job["data_of"]))
        live = view.decode_hash(raw) if raw else {}
        if live.get("status") not in ACTIVE_STATES:
            return job
        return {**job, **{k: v for k, v in live.items() if k not in view.OWN_FIELDS}}

    def owner(self, job_id: str) -> str:
        """The user who submitted the job (cached per process)."""
        return self._fixed_fields(job_id)[0]

    def _fixed_fields(self, job_id: str) -> tuple[str, str, UnitPlan, tuple[str, str]]:
        """(user, fingerprint, plan, (queue, actor)): immutable per job, so cached per process."""
        fixed = self._fixed.get(job_id)
        if fixed is None:
            job = self._job_hash(job_id)
            fixed = (job["user"], job["fingerprint"], view.plan_of(job), (job["queue"], job["actor"]))
            if len(self._fixed) >= 1024:
                self._fixed.clear()
            self._fixed[job_id] = fixed
        return fixed
