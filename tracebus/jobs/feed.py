"""The stored result chunks of a job, section by section, as raw bytes: read ahead in
pipelined batches, and optionally followed while the job still runs.

A reader that sends a result out (the API's streams) wants the stored values as they are
(the msgpack wire format forwards them without decoding) and wants the next few ready
before the socket asks for them: :meth:`ChunkFeed.section` GETs ``READ_AHEAD_CHUNKS``
chunks per round trip and yields them one by one, so Redis latency is paid once per batch.

In follow mode the feed starts before the job has finished: it yields the chunks of the
committed prefix of units (the same prefix :func:`tracebus.jobs.results.read_layout` reads,
so offsets never shift), then blocks on the job's progress stream (XREAD BLOCK: a unit
settling appends an event after its manifest entry is written) and reads again. A section
ends when every unit is committed, or when it cannot grow any more: the next unit in order
failed or was cancelled, or the job reached a final state. :attr:`ChunkFeed.complete` says
which sections ended whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import msgpack

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.errors import FollowTimeout, JobNotFound, JobResultExpired
from tracebus.jobs.results import manifest_counts, read_layout
from tracebus.jobs.states import DEAD_UNIT_STATES, FINAL_STATES

#: Chunks fetched per round trip (~0.3 MB each compressed). One: a stream nobody reads pins
#: what it read ahead (with 8 that was ~3 MB of each of them, issue 24; the second of 2 was a
#: third of what an unread NDJSON stream held after issue 39's pieces).
READ_AHEAD_CHUNKS = 1
#: Longest single wait on the progress stream before the job's state is read again.
WAIT_MS = 1000
#: Unit states after which a unit will not commit (until a retry, which needs a final job).
_DEAD_UNIT = tuple(s.value.encode() for s in DEAD_UNIT_STATES)


@dataclass(frozen=True, slots=True)
class Part:
    """One stored chunk: its row count and its value in :mod:`tracebus.jobs.chunkcodec` format
    (None when only its columnar copy was read), its columnar copy when read
    (:mod:`tracebus.jobs.columnar`), and where it is (section, unit, part, attempt)."""

    rows: int
    value: bytes | None
    copy: bytes | None = None
    where: tuple | None = None


class ChunkFeed:
    """Reads the chunks of one job.

    Args:
        store(JobStore): the job store.
        job_id(str): the job.
        batch(int): chunks per pipelined round trip.
        max_s(float | None): in follow mode, give up after this long (:class:`FollowTimeout`).
    """

    def __init__(self, store, job_id: str, batch: int = READ_AHEAD_CHUNKS, max_s: float | None = None):
        self.store, self.job_id, self.batch = store, job_id, batch
        self._data_id: str | None = None
        self.deadline = None if max_s is None else time.monotonic() + max_s
        self.complete: dict[str, bool] = {}
        self._mark = b"0-0"

    @property
    def data_id(self) -> str:
        """The job whose keys hold the outputs (another job's, for a reused result)."""
        if self._data_id is None:
            self._data_id = self.store.data_id(self.job_id)
        return self._data_id

    # -- a finished section ----------------------------------------------------------------
    def parts(self, section: str, parts: Sequence[tuple[int, int, int]],
              attempts: Mapping[int, int], columnar: bool = False) -> Iterator[Part]:
        """The chunks ``(unit, part, rows)`` of ``section``, in order, ``batch`` per round trip;
        ``attempts`` names each unit's committed attempt (:attr:`Layout.attempts`), part of
        its chunks' keys. On a cluster the chunks of one batch sit on several masters: the
        cluster pipeline sends each master its share.

        Args:
            columnar: read each chunk's columnar copy instead (``Part.copy``, ``Part.value``
                None), and the msgpack chunk only where there is no copy (one more round trip).

        Raises:
            JobResultExpired: a chunk is gone.
        """
        keys = self.store.keys
        for i in range(0, len(parts), self.batch):
            wanted = parts[i:i + self.batch]
            copies = [None] * len(wanted)
            if columnar:
                copies = self._get([keys.job_chunk_copy(self.data_id, section, u, p, attempts[u])
                                    for u, p, _ in wanted])
            missing = [j for j, c in enumerate(copies) if c is None]
            values = [None] * len(wanted)
            for j, value in zip(missing, self._get([keys.job_chunk(self.data_id, section, wanted[j][0],
                                                                    wanted[j][1], attempts[wanted[j][0]])
                                                     for j in missing])):
                if value is None:
                    raise JobResultExpired(f"result of job {self.job_id} section {section} has expired")
                values[j] = value
            for (unit, part, rows), value, copy in zip(wanted, values, copies):
                yield Part(rows, value, copy, (section, unit, part, attempts[unit]))

    def value(self, part: Part) -> bytes:
        """The msgpack chunk of ``part`` (one read by :meth:`parts` with ``columnar``).

        Raises:
            JobResultExpired: it is gone.
        """
        if part.value is not None:
            return part.value
        section, unit, index, attempt = part.where
        [value] = self._get([self.store.keys.job_chunk(self.data_id, section, unit, index, attempt)])
        if value is None:
            raise JobResultExpired(f"result of job {self.job_id} section {section} has expired")
        return value

    def _get(self, names: list[str]) -> list:
        if not names:
            return []
        with redis_errors():
            pipe = self.store.redis.pipeline(transaction=False)
            for name in names:
                pipe.get(name)
            return pipe.execute()

    # -- follow mode -------------------------------------------------------------------------
    def follow(self, section: str, units: Sequence[int]) -> Iterator[Part]:
        """The chunks of ``section`` as its units commit, in unit order; returns when the
        section is whole (``complete[section]`` True) or can no longer grow (False).

        Args:
            units(Sequence[int]): the section's units in result order.

        Raises:
            JobNotFound: the job is gone (expired).
            JobResultExpired: a committed chunk is gone.
            FollowTimeout: the deadline passed first.
        """
        next_unit = 0
        while True:
            committed, dead, final = self._scan(section, units[next_unit:])
            if committed:
                parts = [(unit, part, count) for unit, _, counts in committed
                         for part, count in enumerate(counts)]
                next_unit += len(committed)
                yield from self.parts(section, parts, {unit: attempt for unit, attempt, _ in committed})
                continue  # more may have committed meanwhile: read again before waiting
            if next_unit == len(units):
                self.complete[section] = True
                return
            if dead or final:
                self.complete[section] = False
                return
            self._wait()

    def total_if_complete(self, section: str, units: Sequence[int]) -> int | None:
        """Rows of ``section`` when every unit of it is committed now, else None."""
        layout = read_layout(self.store.redis, self.store.keys, self.data_id, section, units)
        return layout.total if layout.complete else None

    def wait_final(self) -> None:
        """Block until the job reaches a final state.

        Raises:
            JobNotFound: the job is gone.
            FollowTimeout: the deadline passed first.
        """
        while not self._scan(None, ())[2]:
            self._wait()

    def _scan(self, section: str | None, units: Sequence[int]) -> tuple[list, bool, bool]:
        """One round trip: (committed prefix of ``units`` as (unit, attempt, counts), whether the first
        uncommitted unit is failed or cancelled, whether the job is final). The progress mark
        is read first, so an event appended after this scan wakes :meth:`_wait` at once."""
        keys = self.store.keys
        with redis_errors():
            pipe = self.store.redis.pipeline(transaction=False)
            pipe.xrevrange(keys.job_progress(self.job_id), count=1)
            pipe.hget(keys.job(self.job_id), "status")
            if units:
                pipe.hmget(keys.job_manifest(self.data_id, section), list(units))
                pipe.hmget(keys.job_units(self.data_id), list(units))
            replies = pipe.execute()
        last, status = replies[0], replies[1]
        if status is None:
            raise JobNotFound(f"no job {self.job_id}")
        if last:
            self._mark = last[0][0]
        committed, dead = [], False
        if units:
            for unit, packed, state in zip(units, replies[2], replies[3]):
                if packed is None:
                    dead = state is not None and msgpack.unpackb(state).get("state", "").encode() in _DEAD_UNIT
                    break
                committed.append((unit, *manifest_counts(packed)))
        return committed, dead, status.decode() in FINAL_STATES

    def _wait(self) -> None:
        """Wait for the next progress event (or :data:`WAIT_MS`)."""
        wait_ms = WAIT_MS
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise FollowTimeout(f"job {self.job_id} did not end within the follow deadline")
            wait_ms = max(1, min(wait_ms, int(left * 1000)))
        with redis_errors():
            self.store.redis.xread({self.store.keys.job_progress(self.job_id): self._mark}, count=1,
                                   block=wait_ms)
