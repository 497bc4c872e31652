"""The job sweeper: no job is stranded, and the job timeout holds even when no unit runs.

A supervisor runs :meth:`Sweeper.maybe_sweep` from its housekeeping (through the jobs
middleware's ``supervisor_tick`` hook); a lock key with a TTL (``SET NX PX``) lets one
supervisor sweep per period, and a sweep is idempotent anyway. For every queued or running
job (every job of the jobs index, ``P:{jobs}:index``, whose hash says queued or running) it:

* fails the job when it ran past ``TRACE_JOB_TIMEOUT_SECONDS`` (the workers check it only
  when a unit starts, so a job with nothing running would otherwise never time out);
* when the job has been idle past ``TRACE_JOB_SWEEP_GRACE_SECONDS`` (no progress event),
  looks for the messages of its queued and running units in its queue's stream (waiting or
  pending on a worker) and delayed zset (a retry); units with none are stranded (a submit
  that died between taking and sending them, a message dead-lettered) and are re-sent
  (``job_resume.lua``), or the job is failed with the reason when that keeps happening or
  nothing is left to run (a job with nothing sent yet whose user's other jobs hold every
  place of the user's share, :mod:`tracebus.jobs.share`, is waiting its turn, not stranded);
* a unit whose message is pending on a live worker that is running something else (the
  unit failed while Redis was away and its retry could not be scheduled, so the entry sits
  in that worker's PEL, its lease renewed by the supervisor, never to run) is requeued from
  that worker's PEL, as the supervisor does for a dead worker's entries.

On a Redis Cluster the sweeper reads the index in the ``{jobs}`` slot and every job's hash
and units with plain reads (pipelined: the cluster client sends each master its share), and
changes a job only through its job-tag scripts (``job_resume.lua``, ``job_cancel.lua``,
``job_take.lua``), each followed by the figures and the admission release of their own slots
(:class:`tracebus.jobs.store.JobStore`). The index, not the per-status zsets, is what it
reads: a job is filed in the index before it is created, while its status figure is written
after each change and can be lost with the process that made the change. The sweep repairs
such a figure as it reads: a job whose hash is final but that a ``queued`` or ``running``
zset still holds, or an active job missing from its status zset, is filed again under the
status its hash says (``JobFigures.refile``), so ``/metrics`` and the in-flight counts
converge within a sweep.

Scanning a queue costs one pass over its waiting entries, done only when some job is idle
past the grace time. A job whose progress moved since it was judged idle is left to the next
sweep, so a message caught between the stream and the delayed zset is never taken for lost,
nor a job whose last unit in flight just settled (its worker refills the window) for one with
nothing left to run; a rare false "lost" would only cost a duplicate run, which the attempt
fence makes harmless.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import msgpack

from tracebus.engine.errors import DecodeError, RedisFull
from tracebus.engine.keys import Keys as EngineKeys
from tracebus.engine.message import Message
from tracebus.engine.keys import GROUP
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.share import Shares
from tracebus.jobs.states import JobState
from tracebus.jobs.store import JobStore

log = logging.getLogger(__name__)

#: Times one unit may be found stranded and re-sent before its job is failed.
MAX_RESUMES = 3
_ACTIVE = (JobState.QUEUED.value, JobState.RUNNING.value)  # also the active unit states
_SCAN_PAGE = 1000


@dataclass
class SweepReport:
    """What one sweep did (job ids)."""

    timed_out: list[str] = field(default_factory=list)
    resumed: dict[str, list[int]] = field(default_factory=dict)
    requeued: dict[str, list[int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)  # status figures filed again


class Sweeper:
    """Finds stranded and timed-out jobs and resumes or fails them.

    Args:
        store(JobStore): the jobs.
        dispatcher(Dispatcher): sends re-queued units.
        clock: epoch seconds (the store's clock by default).
    """

    def __init__(self, store: JobStore, dispatcher: Dispatcher, clock: Callable[[], float] | None = None):
        self.store, self.dispatcher = store, dispatcher
        self.shares = Shares(store)
        self.redis = store.redis
        self.keys = store.keys
        self.engine_keys = EngineKeys(store.settings.key_prefix)
        self.clock = clock or store.clock
        self._token = os.urandom(8).hex()
        self._next_at = 0.0
        self.repaired: list[str] = []

    def maybe_sweep(self) -> SweepReport | None:
        """Sweep when this process's period is due and no other supervisor holds the lock."""
        now = time.monotonic()
        if now < self._next_at:
            return None
        self._next_at = now + self.store.settings.sweep_s
        period_ms = self.store.settings.sweep_s * 1000
        try:
            with redis_errors():
                # The lock lives just under one period: a supervisor that died mid-sweep holds it
                # no longer.
                if not self.redis.set(self.keys.sweep_lock(), self._token, nx=True,
                                      px=max(period_ms - 100, 100)):
                    return None
        except RedisFull:
            pass  # a full Redis refuses the lock; sweeping twice is harmless, and timeouts must hold
        return self.sweep()

    def sweep(self) -> SweepReport:
        """One pass over every queued and running job."""
        report = SweepReport()
        now_ms = int(self.clock() * 1000)
        idle = {}  # job id -> its last progress event (its stream entry id) when judged idle
        self.repaired = report.repaired
        for job_id, job in self._active_jobs(now_ms).items():
            if self._overdue(job, now_ms):
                if self.store.time_out(job_id):
                    log.error("job %s failed: ran past %d s (found by the sweeper)", job_id,
                              self.store.settings.job_timeout_s, extra={"job_id": job_id})
                    report.timed_out.append(job_id)
            elif job["joined"]:
                continue  # it runs nothing: it ends with the job it joined (or times out, above)
            elif now_ms - job["last_ms"] > self.store.settings.sweep_grace_s * 1000:
                idle[job_id] = job["progress_id"]
        if idle:
            self._resume_stranded(idle, report)
        return report

    # -- reading -------------------------------------------------------------------------------
    def _active_jobs(self, now_ms: int) -> dict[str, dict]:
        with redis_errors():
            everyone = sorted(j.decode() for j in self.redis.zrange(self.keys.jobs_index(), 0, -1))
            ids, hashes = [], []
            for i in range(0, len(everyone), _SCAN_PAGE):
                page = everyone[i:i + _SCAN_PAGE]
                pipe = self.redis.pipeline(transaction=False)
                for job_id in page:
                    pipe.hmget(self.keys.job(job_id), "status", "created_ms", "retried_ms", "queue", "joined")
                    pipe.pttl(self.keys.job(job_id))
                    for status in _ACTIVE:
                        pipe.zscore(self.keys.jobs_by_status(status), job_id)
                replies = pipe.execute()
                for n, job_id in enumerate(page):
                    fields, pttl, *filed = replies[4 * n:4 * n + 4]
                    if fields[0] is None:
                        continue  # expired, or a creation that failed: pruned from the index later
                    status = fields[0].decode()
                    self._repair_figure(job_id, status, pttl, dict(zip(_ACTIVE, filed)), now_ms)
                    if status in _ACTIVE:
                        ids.append(job_id)
                        hashes.append(fields)
            last = self._last_progress(ids)
        jobs = {}
        for job_id, (status, created, retried, queue, joined), last_id in zip(ids, hashes, last):
            started = int(retried or created or now_ms)
            jobs[job_id] = {"started_ms": started, "last_ms": max(last_id[0], started), "progress_id": last_id,
                            "queue": (queue or b"").decode(), "joined": joined is not None}
        return jobs

    def _repair_figure(self, job_id: str, status: str, pttl_ms: int, filed: dict, now_ms: int) -> None:
        """Refile a job whose status zsets disagree with its hash (a lost figure)."""
        wrong = any(score is not None for s, score in filed.items() if s != status)
        missing = status in _ACTIVE and filed[status] is None
        if (wrong or missing) and pttl_ms > 0:
            self.store.figures.refile(job_id, now_ms, status, (pttl_ms + 999) // 1000)
            self.repaired.append(job_id)

    def _last_progress(self, ids: list[str]) -> list[tuple[int, int]]:
        """Each job's last progress event: its stream entry id as (epoch ms, sequence), (0, 0)
        when none. The whole id, not its ms: two events in one millisecond (a unit begun, then
        settled on a quick host) differ only in their sequence."""
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.xrevrange(self.keys.job_progress(job_id), count=1)
        out = []
        for reply in pipe.execute():
            out.append(tuple(int(part) for part in reply[0][0].split(b"-")) if reply else (0, 0))
        return out

    def _overdue(self, job: dict, now_ms: int) -> bool:
        return now_ms - job["started_ms"] > self.store.settings.job_timeout_s * 1000

    def _unsettled(self, job_ids: list[str]) -> dict[str, list[int]]:
        """Each job's queued or running units."""
        with redis_errors():
            pipe = self.redis.pipeline(transaction=False)
            for job_id in job_ids:
                pipe.hgetall(self.keys.job_units(job_id))
            replies = pipe.execute()
        out = {}
        for job_id, units in zip(job_ids, replies):
            out[job_id] = sorted(int(u) for u, raw in units.items()
                                 if msgpack.unpackb(raw).get("state") in _ACTIVE)
        return out

    def _held(self, job_ids: set[str], queues: set[str]) -> dict[tuple[str, int], tuple | None]:
        """(job, unit) of every message of these jobs waiting, pending or delayed in ``queues``,
        each with (queue, entry id, message) when it is in a stream (None when delayed).

        The delayed zset is read first and the stream after: a retry moves a message from the
        stream to the zset and a promotion back to the stream's end, so a message that moves
        during the scan is still seen once (or its job's progress moved and the job is skipped).
        """
        held: dict[tuple[str, int], tuple | None] = {}

        def note(raw: bytes, where: tuple | None) -> None:
            try:
                message = Message.decode(raw)
            except DecodeError:
                return
            args = message.args
            if len(args) >= 2 and args[0] in job_ids:
                key = (args[0], int(args[1]))
                held[key] = held.get(key) or ((where + (message,)) if where else None)

        with redis_errors():
            for queue in queues:
                for raw in self.redis.zrange(self.engine_keys.delayed(queue), 0, -1):
                    note(raw, None)
                stream, start = self.engine_keys.stream(queue), "-"
                while True:
                    page = self.redis.xrange(stream, start, "+", count=_SCAN_PAGE)
                    for entry_id, fields in page:
                        note(fields.get(b"m", b""), (queue, entry_id.decode()))
                    if len(page) < _SCAN_PAGE:
                        break
                    start = "(" + page[-1][0].decode()
        return held

    # -- acting --------------------------------------------------------------------------------
    def _resume_stranded(self, idle: dict[str, int], report: SweepReport) -> None:
        with redis_errors():
            queues = {q.decode() for q in (self.redis.hget(self.keys.job(j), "queue") for j in idle) if q}
        before = dict(zip(idle, self._last_progress(idle)))
        unsettled = self._unsettled(list(idle))
        held = self._held(set(idle), queues)
        after = dict(zip(idle, self._last_progress(idle)))
        for job_id, seen in idle.items():
            if not seen == before[job_id] == after[job_id]:
                continue  # it moved since it was judged idle (a unit settled and refills): not stranded
            lost = [u for u in unsettled[job_id] if (job_id, u) not in held]
            if unsettled[job_id] and not lost:
                # Every unit in flight has its message: waiting its turn, running, or held by
                # a worker that is running something else.
                self._requeue_orphans(job_id, [held[(job_id, u)] for u in unsettled[job_id]], report)
                continue
            self._resume(job_id, lost, report)

    def _requeue_orphans(self, job_id: str, entries: list[tuple | None], report: SweepReport) -> None:
        """Requeue entries pending on a live worker whose registry says it runs another message.

        The worker publishes its current message at least once a second while it runs one, and
        the job has been idle past the grace time, so an entry it holds but does not run is
        not about to start: it was left in its PEL when settling it failed.
        """
        broker = self.dispatcher.broker
        for entry in entries:
            if entry is None:
                continue  # a scheduled retry
            queue, entry_id, message = entry
            with redis_errors():
                pending = self.redis.xpending_range(self.engine_keys.stream(queue), GROUP, entry_id, entry_id, 1)
                if not pending:
                    continue  # waiting in the stream, not delivered yet
                consumer = pending[0]["consumer"].decode()
                current = self.redis.hget(self.engine_keys.worker(consumer), "current")
            if current is None or current.decode() == f"{message.actor_name}:{message.message_id}":
                continue  # a dead worker's entries are the supervisor's and the janitor's; or it runs it
            requeued = broker.requeue_pending(queue, consumer, "held by a worker that was not running it",
                                              only=[entry_id])[0]
            if requeued:
                log.warning("job %s unit %d: its message was stuck on worker %s, not running; requeued",
                            job_id, message.args[1], consumer, extra={"job_id": job_id})
                report.requeued.setdefault(job_id, []).append(int(message.args[1]))

    def _resume(self, job_id: str, lost: list[int], report: SweepReport) -> None:
        kind, value = self.store.resume(job_id, lost, MAX_RESUMES)
        if kind == "skip":
            return
        if kind == "fail":
            self._fail(job_id, f"stranded: {value}", report)
            return
        units = value
        try:
            if not units:  # nothing was in flight: open the window again, within the user's share
                opened = self.shares.open_units(job_id)
                units = opened.pop(job_id, [])
                for other, more in opened.items():
                    self.dispatcher.send(other, more)
            if not units and self.shares.waiting(job_id):
                return  # held back while its user's other jobs hold their places: not stranded
            if not units:
                self._fail(job_id, "stranded: no unit left to run, yet the job never finished", report)
                return
            self.dispatcher.send(job_id, units)
        except RedisFull as e:
            self._fail(job_id, f"stranded and cannot be resumed: {e}", report)
            return
        log.warning("job %s was stranded: units %s re-sent by the sweeper", job_id,
                    ",".join(map(str, units)), extra={"job_id": job_id})
        report.resumed[job_id] = units

    def _fail(self, job_id: str, reason: str, report: SweepReport) -> None:
        if self.store.fail(job_id, reason):
            log.error("job %s failed: %s", job_id, reason, extra={"job_id": job_id})
            report.failed[job_id] = reason
