"""Fair shares of the workers between users: who gets a place in the queue when one frees up.

Units reach the workers through one FIFO stream per queue, and each job keeps at most
``TRACE_JOB_MAX_INFLIGHT_UNITS`` of them queued or running (its window, refilled as they
settle), so the stream alternates between jobs; but a user with five jobs held five windows,
and another user's small job waited behind all of them (issue 40: a 25-unit job took 31.5 s
instead of 1.2 s). Here the units queued or running of all of one user's jobs on one queue
are capped at ``TRACE_USER_MAX_INFLIGHT_UNITS`` (the per-job window by default): whatever a
user has queued, the stream holds at most that many of their units, so another user's unit
waits behind at most that many per other busy user, never behind the first user's backlog.
Within a user a free place goes to the job that holds the fewest, the oldest first among
equals (the rule of the source's places, :mod:`tracebus.jobs.places`), so a user's small job
runs beside their own big one instead of after it.

The share never leaves a worker idle: when a user's jobs have used their share and nothing
waits in the queue's stream (every message is on a worker, so a worker is free or about to
be), a refill lends the user one place more (:meth:`Shares.open_units`), one message at a
time, so that a user alone keeps every worker busy. A borrowed place is never refilled once
another user's units wait: the lender's units settle down to their share while the other
user's run, and those waited behind at most the one message the last loan queued.

Places are handed out by whoever refills a window (:meth:`Shares.open_units`): the worker
after each unit (its own job's take always runs, with the unit for ``job_take.lua``'s memo,
so a redelivered message re-sends what the first refill took for that job), the submit
(:meth:`tracebus.jobs.dispatch.Dispatcher.start`: the new job's share only), a retry
(:meth:`Shares.room`) and the sweeper. The user's jobs live in slots of their own, so the
count is read and the takes run after it: two refills of one user at the same moment may
both see the last free place (or both lend one) and pass the cap by one each for a moment;
the next refill takes nothing until they settle. What a refill took for another job of the
user is not in the memo: a worker dying between that take and its send leaves those units
to the sweeper (re-sent after ``TRACE_JOB_SWEEP_GRACE_SECONDS``). A
job held back (its user's places taken by their other jobs) has nothing queued and is not
stranded: the sweeper leaves it (:meth:`Shares.waiting`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from tracebus.engine.keys import GROUP
from tracebus.engine.keys import Keys as EngineKeys
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.errors import JobNotFound
from tracebus.jobs.states import JobState

_ACTIVE = (JobState.QUEUED.value.encode(), JobState.RUNNING.value.encode())
#: Rounds of takes in one refill: a job given a place may take fewer units than offered (its
#: next stage is gated, its todo emptied meanwhile), and its places go to the others.
_ROUNDS = 3


@dataclass(slots=True)
class Peer:
    """One of a user's active jobs on a queue: units queued or running, units not yet sent."""

    job_id: str
    since: float
    inflight: int
    todo: int


@dataclass(slots=True)
class _Refill:
    """What one refill (:meth:`Shares.open_units`) carries from one round of takes to the next."""

    job_id: str
    by_unit: int | None
    only_own: bool
    peers: list[Peer]
    #: job id -> the units taken for it, to send.
    taken: dict[str, list[int]] = field(default_factory=dict)
    #: Jobs that took fewer units than offered: offered no more.
    short: set[str] = field(default_factory=set)
    #: ``job_id``'s take ran (with the memo), so it is not offered a place of 0 again.
    own_asked: bool = False
    #: Whether nothing waited in the queue's stream: asked once, when the share is used up.
    lend: bool | None = None


class Shares:
    """The per-user cap of units in flight over a :class:`~tracebus.jobs.store.JobStore`."""

    def __init__(self, store):
        self.store = store
        self._streams = EngineKeys(store.settings.key_prefix)

    @property
    def cap(self) -> int:
        """Units one user's jobs on one queue may have queued or running."""
        s = self.store.settings
        return s.user_max_inflight_units or s.job_max_inflight_units

    def peers(self, job_id: str) -> list[Peer]:
        """``job_id`` and its user's other active jobs on its queue (not those joined to
        another user's job: they run nothing)."""
        store = self.store
        user, queue = store.user_of(job_id), self.queue(job_id)
        keys = store.keys
        with redis_errors():
            # The user's jobs and ``job_id``'s own state in one round trip (most users run one
            # job at a time); the others' in a second one.
            pipe = store.redis.pipeline(transaction=False)
            pipe.zrange(keys.user_jobs(user), 0, -1, withscores=True)
            pipe.hmget(keys.job(job_id), "status", "inflight", "queue", "joined")
            pipe.llen(keys.job_todo(job_id))
            listed, *own = pipe.execute()
            members = {m.decode(): score for m, score in listed}
            members.setdefault(job_id, float("inf"))  # its admission expired, or never was (tests)
            ids = list(members)
            others = [peer for peer in ids if peer != job_id]
            rest: list = []
            if others:
                pipe = store.redis.pipeline(transaction=False)
                for peer in others:
                    pipe.hmget(keys.job(peer), "status", "inflight", "queue", "joined")
                    pipe.llen(keys.job_todo(peer))
                rest = pipe.execute()
        got = {job_id: own, **{peer: rest[2 * n:2 * n + 2] for n, peer in enumerate(others)}}
        replies = [r for peer in ids for r in got[peer]]
        peers = []
        for n, peer in enumerate(ids):
            (status, inflight, peer_queue, joined), todo = replies[2 * n], replies[2 * n + 1]
            if status in _ACTIVE and joined is None and (peer_queue or b"").decode() == queue:
                peers.append(Peer(peer, members[peer], int(inflight or 0), int(todo)))
        return peers

    def queue(self, job_id: str) -> str:
        return self.store.route(job_id)[0]

    def nothing_waiting(self, queue: str) -> bool:
        """True when no message of ``queue`` waits for a worker (every one was read), so a
        worker is free or about to be; False too when no worker ever read the queue."""
        stream = self._streams.stream(queue)
        try:
            with redis_errors():
                pipe = self.store.redis.pipeline(transaction=False)
                pipe.xlen(stream)
                pipe.xpending(stream, GROUP)
                length, pending = pipe.execute()
        except redis.ResponseError:  # NOGROUP: the queue was never declared
            return False
        return length - (pending["pending"] if isinstance(pending, dict) else 0) <= 0

    def open_units(self, job_id: str, by_unit: int | None = None, only_own: bool = False) -> dict[str, list[int]]:
        """Take units into the free places of ``job_id``'s user: each place to the job that
        holds the fewest, the oldest first, within every job's own window.

        Args:
            by_unit: the unit of ``job_id`` that just settled (the take's memo: a repeat call
                re-sends what the first one took for ``job_id``). ``job_id``'s take runs
                even when it gets no place, so that a memo is replayed.
            only_own: take for ``job_id`` alone (a submit: it rolls back only its own job).

        Returns:
            dict: job id -> the units now queued that the caller must send (jobs with none left out).
        """
        per_job = self.store.settings.job_max_inflight_units
        try:
            peers = self.peers(job_id)
        except JobNotFound:
            return {}
        if not any(p.job_id == job_id for p in peers):
            # Finished or cancelled: its take answers its memo (or nothing); its place is
            # handed to its user's other jobs below.
            peers.append(Peer(job_id, float("inf"), 0, 0))
        refill = _Refill(job_id, by_unit, only_own, peers)
        for _ in range(_ROUNDS):
            offers = self._round_offers(refill, per_job)
            if not any(offers.values()) and refill.own_asked:
                break
            self._take_offers(refill, offers)
            if only_own or not refill.short:
                break
        return refill.taken

    def _round_offers(self, refill: _Refill, per_job: int) -> dict[str, int]:
        """The places one round of ``refill`` offers each job: the user's free ones, or one
        lent when they are used up and nothing waits in the queue's stream; ``job_id`` offered
        0 at least until its take ran (for its memo), and alone when ``only_own``."""
        peers, short, job_id = refill.peers, refill.short, refill.job_id
        offers = self._offers(peers, per_job, short, 0)
        if not any(offers.values()) and refill.lend is None and self._could_take(peers, per_job, short):
            refill.lend = self.nothing_waiting(self.queue(job_id))
            offers = self._offers(peers, per_job, short, 1 if refill.lend else 0)
        if not refill.own_asked:
            offers.setdefault(job_id, 0)
        if refill.only_own:
            offers = {job_id: offers[job_id]}
        return offers

    def _take_offers(self, refill: _Refill, offers: dict[str, int]) -> None:
        """Take each job's offered units (``job_id``'s first take with the memo, even of 0),
        noting what each got in ``refill.taken`` and the jobs that got fewer in ``refill.short``."""
        for peer in refill.peers:
            n = offers.get(peer.job_id)
            if n is None:
                continue
            own = peer.job_id == refill.job_id
            memo = refill.by_unit if own and not refill.own_asked else None
            if own:
                refill.own_asked = True
            if n == 0 and memo is None:
                continue
            got = self.store.take_next_units(peer.job_id, n, by_unit=memo)
            if got:
                refill.taken.setdefault(peer.job_id, []).extend(got)
                peer.inflight += len(got)
                peer.todo = max(0, peer.todo - len(got))
            if len(got) < n:
                refill.short.add(peer.job_id)

    @staticmethod
    def _could_take(peers: list[Peer], per_job: int, short: set[str]) -> bool:
        return any(p.job_id not in short and p.todo > 0 and p.inflight < per_job for p in peers)

    def _offers(self, peers: list[Peer], per_job: int, short: set[str], lent: int) -> dict[str, int]:
        """Free places of the user (and ``lent`` more), one at a time to the job holding fewest
        (then the oldest)."""
        room = max(0, self.cap - sum(p.inflight for p in peers)) + lent
        held = {p.job_id: p.inflight for p in peers}
        offers = {p.job_id: 0 for p in peers}
        while room > 0:
            open_ = [p for p in peers if p.job_id not in short and offers[p.job_id] < p.todo
                     and held[p.job_id] < per_job]
            if not open_:
                break
            best = min(open_, key=lambda p: (held[p.job_id], p.since, p.job_id))
            offers[best.job_id] += 1
            held[best.job_id] += 1
            room -= 1
        return offers

    def room(self, job_id: str) -> int:
        """Units ``job_id`` may have queued at once now, were it to start again (a retry): its
        window, less what its user's other jobs on its queue hold past their share."""
        others = sum(p.inflight for p in self.peers(job_id) if p.job_id != job_id)
        return max(0, min(self.store.settings.job_max_inflight_units, self.cap - others))

    def waiting(self, job_id: str) -> bool:
        """True when ``job_id`` has units to send and its user's other jobs on its queue hold
        places: it is held back for fairness, and gets a place when one of theirs settles."""
        try:
            peers = self.peers(job_id)
        except JobNotFound:
            return False
        own = next((p for p in peers if p.job_id == job_id), None)
        return own is not None and own.todo > 0 and any(p.inflight for p in peers if p.job_id != job_id)
