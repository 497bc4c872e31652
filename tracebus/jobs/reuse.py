"""Results reused across requests: an identical request is answered from a completed result.

A mixin of :class:`tracebus.jobs.store.JobStore`. A job whose spec has a ``result_key`` (its
kind's fingerprint of the request: see :attr:`tracebus.jobs.spec.JobSpec.result_key`) files
its result when it completes, and only then (never a partial, failed or cancelled one):
``P:reuse:{<result key>}`` names the job whose keys hold it (the holder), the result's own id,
when it completed, and the fields of the holder's hash a job reusing it copies.

A later request with the same key, younger than ``TRACE_RESULT_REUSE_MAX_AGE_S``, gets a job of
its own (its own id, owner, hash and progress stream, created completed) whose hash says
``data_of``: every read of its outputs (manifests, chunks, partials, artifacts, units, inputs)
goes to the holder's keys (:meth:`tracebus.jobs.reads.JobReads.data_id`); nothing is copied.
Each reuse first gives every key of the result a fresh full TTL (so the result lives as long
as the longest job referring to it; a key found gone means the result is gone, and the request
runs), then the record. The status names the result (``reused_from``: the result's id, never
the holder job's) and its age (``result_age_s``); the age is that of the run, so reuse does not
make a result younger. Keys of the result that live outside the job layer (a kind's own) are
the kind's to extend (:meth:`JobReuse.reuse` returns the holder to it).

Two steps, one slot each: the record (the result's tag), then the new job (its own tag); a
process dying in between leaves a record with a fresh TTL and no job, which expires.
"""

from __future__ import annotations

import json
import secrets

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.ids import new_job_id
from tracebus.jobs.results import manifest_counts
from tracebus.jobs.states import JobState
from tracebus.jobs.view import plan_of

#: Fields of the holder's hash that are the new job's own (never copied).
_OWN_FIELDS = ("job_id", "user", "created_ms", "started_ms", "finished_ms", "retried_ms", "fingerprint",
               "result_key", "fresh", "data_of", "reused_from", "result_ms", "inflight")
#: Outcomes counted per kind in the stats hash (``reuse:<outcome>:<kind>``, ``GET /metrics``).
REUSE_OUTCOMES = ("hit", "join", "miss", "fresh")


class JobReuse:
    """Filing and reusing completed results (mixed into ``JobStore``)."""

    def reuse(self, kind: str, user: str, result_key: str, actor: str = "") -> tuple[str, str] | None:
        """A completed job of ``user`` answered from the result of ``result_key``, if one is alive
        and younger than ``TRACE_RESULT_REUSE_MAX_AGE_S``.

        Args:
            kind(str): the job kind (the prefix of the new id; the record's must match).
            actor(str): the unit actor of the kind, checked against the record's when given.

        Returns:
            tuple[str, str] | None: (the new job's id, the holder job whose keys hold the
            result: for the kind's own keys, never shown to the caller), or None (no such
            result: the caller runs the request).
        """
        if not result_key or self.settings.reuse_max_age_s <= 0:
            return None
        key = self.keys.result(result_key)
        with redis_errors():
            record = self.redis.hgetall(key)
        if not record:
            return None
        record = {k.decode(): v for k, v in record.items()}
        holder, completed_ms = record["holder"].decode(), int(record["completed_ms"])
        fields = json.loads(record["fields"])
        now = self._now_ms()
        if (now - completed_ms > self.settings.reuse_max_age_s * 1000 or fields.get("kind") != kind
                or (actor and fields.get("actor") != actor)):
            return None
        held = self._extend_result(holder, fields)
        if held is None:
            with redis_errors():
                self.redis.delete(key)
            return None
        # The reuse keeps the result's bytes in Redis another full TTL: the user's budget holds them
        # (once per result, whatever the reuses; :mod:`tracebus.jobs.budget`).
        self.budget.charge(user, f"reuse:{holder}", held, self.budget.expires_in(self.settings.job_ttl_s), keep=True)
        with redis_errors():
            self.redis.expire(key, self.settings.job_ttl_s)
        job_id = self._create_reused(kind, user, result_key, holder, record["result_id"].decode(),
                                     completed_ms, fields)
        return job_id, holder

    def count_reuse(self, kind: str, outcome: str) -> None:
        """Count one reuse ``outcome`` (:data:`REUSE_OUTCOMES`) of a request of ``kind``."""
        self.figures.count(**{f"reuse:{outcome}:{kind}": 1})

    def _file_result(self, job_id: str) -> None:
        """File the result of ``job_id``, which just completed, under its result key (the newest
        completed run of a key is the one reused)."""
        job = self._job_hash(job_id)
        if not job.get("result_key") or job.get("status") != JobState.COMPLETED or job.get("data_of"):
            return
        fields = {k: v for k, v in job.items() if k not in _OWN_FIELDS}
        key = self.keys.result(job["result_key"])
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hset(key, mapping={"holder": job_id, "result_id": "res-" + secrets.token_hex(12),
                                    "completed_ms": job.get("finished_ms") or self._now_ms(),
                                    "fields": json.dumps(fields, ensure_ascii=False)})
            pipe.expire(key, self.settings.job_ttl_s)
            pipe.execute()

    def _extend_result(self, holder: str, fields: dict[str, str]) -> int | None:
        """Give every job-layer key of ``holder``'s result a fresh full TTL; the bytes of its
        chunks and their copies, or None when one that must be there is gone (the result
        expired or was taken apart)."""
        k, ttl, plan = self.keys, self.settings.job_ttl_s, plan_of(fields)
        with redis_errors():
            pipe = self.redis.pipeline(transaction=False)
            for section in plan.sections:
                pipe.hgetall(k.job_manifest(holder, section))
            manifests = pipe.execute()
            if not all(manifests) or sum(len(m) for m in manifests) != plan.total:
                return None
            chunks = 0
            for section, manifest in zip(plan.sections, manifests):
                for unit, value in manifest.items():
                    attempt, counts = manifest_counts(value)
                    for part in range(len(counts)):
                        pipe.expire(k.job_chunk(holder, section, int(unit), part, attempt), ttl)
                        pipe.expire(k.job_chunk_copy(holder, section, int(unit), part, attempt), ttl)
                        pipe.strlen(k.job_chunk(holder, section, int(unit), part, attempt))
                        pipe.strlen(k.job_chunk_copy(holder, section, int(unit), part, attempt))
                        chunks += 1
            found = pipe.execute()
            if not all(found[0:4 * chunks:4]):
                return None
            held = sum(found[2:4 * chunks:4]) + sum(found[3:4 * chunks:4])
            for section in plan.sections:
                pipe.expire(k.job_manifest(holder, section), ttl)
            artifacts = [k.job_artifact(holder, f[len("artifact:"):]) for f in fields if f.startswith("artifact:")]
            for key in (k.job_units(holder), k.job_inputs(holder), *artifacts):
                pipe.expire(key, ttl)
            pipe.expire(k.job_partials(holder), ttl)  # a kind may keep no partials
            found = pipe.execute()
        return held if all(found[:-1]) else None

    def _create_reused(self, kind: str, user: str, result_key: str, holder: str, result_id: str,
                       completed_ms: int, fields: dict[str, str]) -> str:
        job_id, now, ttl = new_job_id(kind), self._now_ms(), self.settings.job_ttl_s
        own = {**fields, "job_id": job_id, "user": user, "created_ms": now, "started_ms": now,
               "finished_ms": now, "fingerprint": "", "result_key": result_key, "fresh": 0,
               "data_of": holder, "reused_from": result_id, "result_ms": completed_ms, "inflight": 0,
               "status": JobState.COMPLETED.value}
        total, rows = int(fields.get("units_total", 0)), int(fields.get("rows", 0))
        # Filed in the index before the hash exists, as a new job (the sweeper reads the index).
        self.figures.record(job_id, now, created=True)
        k = self.keys
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(k.job(job_id), mapping=own)
            for event in ("created", "reused"):
                pipe.xadd(k.job_progress(job_id),
                          {"event": event, "status": JobState.QUEUED.value if event == "created" else
                           JobState.COMPLETED.value, "units_done": 0 if event == "created" else total,
                           "units_failed": 0, "units_total": total, "rows": 0 if event == "created" else rows,
                           "ts_ms": now})
            pipe.expire(k.job_progress(job_id), ttl)
            pipe.expire(k.job(job_id), ttl)
            pipe.execute()
        self.figures.record(job_id, now, new=JobState.COMPLETED.value, **{f"reuse:hit:{kind}": 1})
        return job_id

