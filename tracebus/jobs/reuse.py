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

A request whose result is not stored yet but runs (the record's ``running``: the job admitted
last with that key, named at its admission) joins it: the user's own job is that job (single
flight); another user gets a job of their own that runs nothing, reads the running job's keys
and shows its live state (:meth:`tracebus.jobs.reads.JobReads._following`), filed in the
running job's ``joined`` set. When the running job ends, every job that joined it ends with
it (``job_join_end.lua``, in each joined job's slot): completed, naming the result just filed,
or failed when the run was partial, failed or cancelled (nothing to share; the message names
no job). Cancelling a joined job ends it alone; it cannot be retried (it has nothing to run);
the sweeper leaves it to the job it joined, or fails it past ``TRACE_JOB_TIMEOUT_SECONDS``.
Its own progress stream has the joining and the end (the live counters are in its status).
"""

from __future__ import annotations

import hashlib
import json

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.errors import JobNotFound
from tracebus.jobs.ids import new_job_id
from tracebus.jobs.results import chunk_keys
from tracebus.jobs.states import ACTIVE_STATES, JobState
from tracebus.jobs.view import OWN_FIELDS, plan_of

#: Fields of the record that name its completed result (``running`` names the run in flight).
_RESULT_FIELDS = ("holder", "result_id", "completed_ms", "fields")
#: Outcomes counted per kind in the stats hash (``reuse:<outcome>:<kind>``, ``GET /metrics``).
REUSE_OUTCOMES = ("hit", "join", "miss", "fresh")


class JobReuse:
    """Filing and reusing completed results (mixed into ``JobStore``)."""

    def reuse(self, kind: str, user: str, result_key: str, actor: str = "") -> tuple[str, str] | None:
        """A job of ``user`` answered from the result of an identical request: its completed result
        when one is alive and younger than ``TRACE_RESULT_REUSE_MAX_AGE_S`` (a new job, created
        completed), else its job in flight (the user's own: that job; another user's: a new job
        that joins it, :meth:`_join`).

        Args:
            kind(str): the job kind (the prefix of the new id; the record's must match).
            actor(str): the unit actor of the kind, checked against the record's when given.

        Returns:
            tuple[str, str] | None: (the job's id, the holder job whose keys hold the result:
            for the kind's own keys, never shown to the caller), or None (neither: the caller
            runs the request).
        """
        if not result_key or self.settings.reuse_max_age_s <= 0:
            return None
        key = self.keys.result(result_key)
        record = self._result_record(key)
        if "running" in record and self._file_result(record["running"].decode()):
            # The run in flight had completed but was not filed yet: the settle script ends a job
            # before its worker files the result, and a worker may die between the two.
            record = self._result_record(key)
        if "holder" in record:
            holder, completed_ms = record["holder"].decode(), int(record["completed_ms"])
            fields = json.loads(record["fields"])
            if (self._now_ms() - completed_ms <= self.settings.reuse_max_age_s * 1000
                    and self._same_kind(fields, kind, actor)):
                held = self._extend_result(holder, fields)
                if held is not None:
                    # The reuse keeps the result's bytes in Redis another full TTL: the user's budget
                    # holds them (once per result, whatever the reuses; :mod:`tracebus.jobs.budget`).
                    self.budget.charge(user, f"reuse:{holder}", held, self.budget.expires_in(self.settings.job_ttl_s),
                                       keep=True)
                    with redis_errors():
                        self.redis.expire(key, self.settings.job_ttl_s)
                    job_id = self._create_reused(kind, user, result_key, holder, record["result_id"].decode(),
                                                 completed_ms, fields)
                    return job_id, holder
                with redis_errors():  # gone: the record no longer names it
                    self.redis.hdel(key, *_RESULT_FIELDS)
        if "running" in record:
            return self._join(kind, user, result_key, record["running"].decode(), actor)
        return None

    def _result_record(self, key: str) -> dict[str, bytes]:
        with redis_errors():
            record = self.redis.hgetall(key)
        return {k.decode(): v for k, v in record.items()}

    def _same_kind(self, fields: dict, kind: str, actor: str) -> bool:
        return fields.get("kind") == kind and (not actor or fields.get("actor") == actor)

    def _mark_running(self, result_key: str, job_id: str) -> None:
        """Name ``job_id``, just admitted, as the run in flight of ``result_key`` (for joins). The
        record keeps the TTL of a completed result it holds (NX then GT: never shortened)."""
        key, ttl = self.keys.result(result_key), self.settings.job_ttl_s
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(key, "running", job_id)
            pipe.expire(key, ttl, nx=True)
            pipe.expire(key, ttl, gt=True)
            pipe.execute()

    def _join(self, kind: str, user: str, result_key: str, holder: str, actor: str) -> tuple[str, str] | None:
        """The job of ``user`` that joins ``holder``, the identical request in flight: ``holder``
        itself when it is the user's; else a job of the user's own (its own id, hash and progress
        stream) whose outputs are read from ``holder``'s keys and whose status follows
        ``holder``'s until that ends, then ends completed with its result (its ``reused_from``
        filed by then) or failed (:meth:`_end_joined`). None when ``holder`` is not in flight."""
        try:
            live = self._job_hash(holder)
        except JobNotFound:
            return None
        if live.get("status") not in ACTIVE_STATES or not self._same_kind(live, kind, actor):
            return None
        if live.get("user") == user:
            self.count_reuse(kind, "join")
            return holder, holder
        job_id, now, ttl = new_job_id(kind), self._now_ms(), self.settings.job_ttl_s
        own = {**{k: v for k, v in live.items() if k not in OWN_FIELDS}, "job_id": job_id, "user": user,
               "created_ms": now, "fingerprint": "", "result_key": result_key, "fresh": 0, "data_of": holder,
               "joined": 1, "inflight": 0}
        self.figures.record(job_id, now, created=True)
        k = self.keys
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(k.job(job_id), mapping=own)
            pipe.xadd(k.job_progress(job_id), {"event": "joined", "status": own["status"], "units_done": 0,
                                               "units_failed": 0, "units_total": own.get("units_total", 0),
                                               "rows": 0, "ts_ms": now})
            pipe.expire(k.job_progress(job_id), ttl)
            pipe.expire(k.job(job_id), ttl)
            pipe.execute()
            pipe = self.redis.pipeline(transaction=True)
            pipe.sadd(k.job_joined(holder), job_id)
            pipe.expire(k.job_joined(holder), ttl)
            pipe.hget(k.job(holder), "status")
            status = pipe.execute()[-1]
        self.figures.record(job_id, now, new=own["status"], **{f"reuse:join:{kind}": 1})
        if status is None or status.decode() not in ACTIVE_STATES:
            self._end_joined(holder)  # it ended meanwhile: its own call may have missed this job
        return job_id, holder

    def _end_joined(self, holder: str) -> None:
        """End every job that joined ``holder``, which has just ended: completed as it, with its
        result (filed before this), or failed."""
        k = self.keys
        with redis_errors():
            joined = [j.decode() for j in self.redis.smembers(k.job_joined(holder))]
        if not joined:
            return
        final = self._job_hash(holder)
        if final["status"] == JobState.COMPLETED:
            with redis_errors():
                record = self.redis.hmget(k.result(final.get("result_key") or "-"), "holder", "result_id",
                                          "completed_ms")
            fields = {f: final[f] for f in ("status", "units_done", "units_failed", "units_cancelled", "rows",
                                            "started_ms") if f in final}
            if record[0] is not None and record[0].decode() == holder:
                fields.update(reused_from=record[1].decode(), result_ms=record[2].decode())
        else:
            fields = {"status": JobState.FAILED.value,
                      "error": f"the identical request this job joined ended {final['status']} "
                               "(no result to share); send the request again"}
        pairs = [x for f, v in fields.items() for x in (f, v)]
        for job_id in joined:
            now = self._now_ms()
            ended = self._run_join_end(job_id, now, pairs)
            if ended:
                self.figures.record(job_id, now, old=ended[0].decode(), new=fields["status"],
                                    duration_ms=int(ended[1]))

    def _run_join_end(self, job_id: str, now_ms: int, pairs: list) -> list:
        run = self._join_end
        keys = {"job": self.keys.job(job_id), "progress": self.keys.job_progress(job_id)}
        args = {"now_ms": now_ms, "ttl_s": self.settings.job_ttl_s, "progress_maxlen": 1000, "fields": pairs}
        with redis_errors():
            return run(keys, args)

    def count_reuse(self, kind: str, outcome: str) -> None:
        """Count one reuse ``outcome`` (:data:`REUSE_OUTCOMES`) of a request of ``kind``."""
        self.figures.count(**{f"reuse:{outcome}:{kind}": 1})

    def _file_result(self, job_id: str) -> bool:
        """File the result of ``job_id`` under its result key when it has completed (the newest
        completed run of a key is the one reused); whether it did. Filing twice writes the same
        record: its worker files it after settling, and :meth:`reuse` files a completed run it
        finds still named as running."""
        try:
            job = self._job_hash(job_id)
        except JobNotFound:
            return False
        if not job.get("result_key") or job.get("status") != JobState.COMPLETED or job.get("data_of"):
            return False
        fields = {k: v for k, v in job.items() if k not in OWN_FIELDS}
        key = self.keys.result(job["result_key"])
        # Named from the job's id, one way: the same for every filing, and never the job's id.
        result_id = "res-" + hashlib.sha256(f"result:{job_id}".encode()).hexdigest()[:24]
        with redis_errors():
            running = self.redis.hget(key, "running")
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(key, mapping={"holder": job_id, "result_id": result_id,
                                    "completed_ms": job.get("finished_ms") or self._now_ms(),
                                    "fields": json.dumps(fields, ensure_ascii=False)})
            if running is not None and running.decode() == job_id:
                pipe.hdel(key, "running")
            pipe.expire(key, self.settings.job_ttl_s)
            pipe.execute()
        return True

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
            for chunk, copy in chunk_keys(k, holder, plan.sections, manifests):
                pipe.expire(chunk, ttl)
                pipe.expire(copy, ttl)
                pipe.strlen(chunk)
                pipe.strlen(copy)
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

