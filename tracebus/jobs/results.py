"""Result chunks of a job in Redis: fenced writes, and reading one page.

A unit attempt stores its rows as chunks ``job_chunk(job, section, unit, part, attempt)``
through a :class:`ChunkWriter`. Chunk keys carry their own hash tag (so a large result
spreads over a Redis Cluster's shards) and the attempt, so a stale attempt (a worker that
lost its lease) writes keys nobody reads and can never overwrite a newer one. Each write
checks the unit's current attempt in the job's slot (a fenced-off attempt stops early), and
the final commit, a Lua script fenced the same way, records the attempt and the row count
of every part in the section's manifest hash: readers only trust units in the manifest.
:func:`page` reads one page at a cost proportional to the page. A whole result is read from
:func:`read_layout`'s committed prefix, chunk by chunk: :meth:`tracebus.jobs.store.JobStore.iter_chunks`
(decoded) or :class:`tracebus.jobs.feed.ChunkFeed` (raw bytes, read ahead, optionally followed).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import msgpack
import redis

from tracebus.errors import InvalidParams
from tracebus.jobs.errors import JobNotComplete, JobResultExpired, StaleAttempt
from tracebus.jobs.keys import JobKeys as Keys
from tracebus.jobs import columnar
from tracebus.jobs.budget import KEY_BYTES
from tracebus.jobs.chunkcodec import DEFAULT_COMPRESS, decode_chunk, encode_chunk
from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs.scripts import script


class ChunkWriter:
    """Writes the result chunks of one unit attempt.

    Args:
        redis(redis.Redis): client.
        keys(Keys): key names.
        job_id(str): the job.
        section(str): the unit's section.
        unit(int): the unit index.
        attempt(int): the token from ``JobStore.begin_unit``.
        ttl_s(int): the job TTL: each write's fence renews the job hash with it, and the
            chunk expires when the job hash then does (never after the job's status).
        compress(bool): zlib chunks when it pays (see :mod:`tracebus.jobs.chunkcodec`).
        max_rows(int | None): rows per stored chunk (``settings.stream_batch_rows``): writes
            are buffered and cut into parts of exactly this size, the last one at
            :meth:`commit`, so chunk size does not depend on the source's batch size.
            None stores every :meth:`write` as one part.
        wait(tuple[int, int]): (replicas, timeout ms) the commit waits for
            (:mod:`tracebus.engine.durable`); (0, 0): none.
        columnar(bool): store each chunk's columnar copy (:mod:`tracebus.jobs.columnar`) once
            :attr:`types` names every column.

    Attributes:
        types(Mapping[str, str] | None): column -> type of the unit's rows, set by the job kind
            (:meth:`tracebus.jobs.runner.UnitContext.set_column_types`).
    """

    def __init__(self, redis: redis.Redis, keys: Keys, job_id: str, section: str, unit: int,
                 attempt: int, ttl_s: int, compress: bool = DEFAULT_COMPRESS,
                 max_rows: int | None = None, wait: tuple[int, int] = (0, 0), columnar: bool = False,
                 charge: Callable[[int, int], int] | None = None):
        self._redis, self._keys, self._wait = redis, keys, wait
        self._charge = charge
        self.columnar = columnar
        self.types: Mapping[str, str] | None = None
        self.copies = 0
        self.job_id, self.section, self.unit, self.attempt = job_id, section, unit, attempt
        self.ttl_s, self.compress, self.max_rows = ttl_s, compress, max_rows
        self.counts: list[int] = []
        self._columns: list[str] = []
        self._buffer: list = []
        self._write = script(redis, "result_write")
        self._commit = script(redis, "result_commit")

    @property
    def rows(self) -> int:
        """Rows stored so far by this attempt (buffered rows count after :meth:`commit`)."""
        return sum(self.counts)

    def write(self, columns: Sequence[str], rows: Sequence[Sequence]) -> None:
        """Add ``rows`` to this unit's result (empty ``rows`` are ignored).

        Raises:
            StaleAttempt: a newer attempt owns the unit, or the job was cancelled.
            BrokerConnectionError: Redis is unreachable.
        """
        if not rows:
            return
        if self.max_rows is None:
            self._store(columns, rows)
            return
        self._columns = list(columns)
        self._buffer.extend(rows)
        while len(self._buffer) >= self.max_rows:
            part, self._buffer = self._buffer[:self.max_rows], self._buffer[self.max_rows:]
            self._store(self._columns, part)

    def _store(self, columns: Sequence[str], rows: Sequence[Sequence]) -> None:
        part = len(self.counts)
        keys = {"units": self._keys.job_units(self.job_id), "job": self._keys.job(self.job_id),
                "manifest": self._keys.job_manifest(self.job_id, self.section)}
        payload = encode_chunk(columns, rows, self.compress)
        copy = columnar.encode(columns, rows, self.types) if self.columnar and self.types else None
        key = self._keys.job_chunk(self.job_id, self.section, self.unit, part, self.attempt)
        with redis_errors():
            expires_at_ms = self._write(keys, {"unit": self.unit, "attempt": self.attempt, "ttl_s": self.ttl_s})
            if not expires_at_ms:
                raise StaleAttempt(f"{self.job_id} unit {self.unit}: attempt {self.attempt} fenced off")
        if self._charge is not None:  # the user's budget (tracebus.jobs.budget), before the bytes go in
            self._charge(len(payload) + len(copy or b"") + KEY_BYTES * (1 + (copy is not None)), expires_at_ms)
        with redis_errors():
            if copy is None:
                self._redis.set(key, payload, pxat=expires_at_ms)
            else:  # one MULTI (both keys carry the chunk's tag): the chunk and its copy, or neither
                pipe = self._redis.pipeline(transaction=True)
                pipe.set(key, payload, pxat=expires_at_ms)
                pipe.set(self._keys.job_chunk_copy(self.job_id, self.section, self.unit, part, self.attempt),
                         copy, pxat=expires_at_ms)
                pipe.execute()
                self.copies += 1
        self.counts.append(len(rows))

    def commit(self, partial: bytes = b"") -> int:
        """Record this attempt's parts in the manifest, making them readable.

        Args:
            partial(bytes): the unit's packed partial aggregate, stored in the same fenced
                step (a re-run replaces it); empty when the job's kind keeps none.

        Returns:
            int: rows committed.

        Raises:
            StaleAttempt: a newer attempt owns the unit, or the job was cancelled.
        """
        if self._buffer:
            self._store(self._columns, self._buffer)
            self._buffer = []
        if partial and self._charge is not None:
            self._charge(len(partial), int(time.time() * 1000) + self.ttl_s * 1000)
        keys = {"units": self._keys.job_units(self.job_id),
                "manifest": self._keys.job_manifest(self.job_id, self.section),
                "job": self._keys.job(self.job_id), "partials": self._keys.job_partials(self.job_id)}
        args = {"unit": self.unit, "attempt": self.attempt, "ttl_s": self.ttl_s,
                "entry": msgpack.packb([self.attempt, self.counts]), "partial": partial}
        with redis_errors():
            # The commit follows the chunk writes on the same connection, so WAIT covers them too
            # (on a cluster the chunks' master is waited for as well: they sit under their own tag).
            ok = self._commit(keys, args, wait=self._wait,
                              also=[self._keys.job_chunk(self.job_id, self.section, self.unit, 0, self.attempt)])
        if not ok:
            raise StaleAttempt(f"{self.job_id} unit {self.unit}: attempt {self.attempt} fenced off")
        self._drop_older_attempts()
        return self.rows

    def _drop_older_attempts(self, batch: int = 16) -> None:
        """Delete the chunks (and their columnar copies) earlier attempts of this unit left (a killed or fenced-off
        worker), which no manifest names; whatever a still-running stale attempt writes
        after this expires with the TTL."""
        for attempt in range(1, self.attempt):
            part = 0
            while True:
                pipe = self._redis.pipeline(transaction=False)
                for p in range(part, part + batch):
                    pipe.delete(self._keys.job_chunk(self.job_id, self.section, self.unit, p, attempt))
                    pipe.delete(self._keys.job_chunk_copy(self.job_id, self.section, self.unit, p, attempt))
                with redis_errors():
                    deleted = pipe.execute()[::2]  # the chunks' answers (a copy may not exist)
                if not all(deleted):
                    break
                part += batch


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the rows of the readable prefix of one section are.

    Attributes:
        parts(list[tuple[int, int, int]]): (unit, part, rows) of every chunk, in order.
        starts(list[int]): offset of the first row of each chunk.
        total(int): rows in the readable prefix.
        complete(bool): every unit of the section is committed.
        attempts(dict[int, int]): unit -> its committed attempt (part of its chunks' keys).
    """

    parts: list[tuple[int, int, int]]
    starts: list[int]
    total: int
    complete: bool
    attempts: dict[int, int] = field(default_factory=dict)


def manifest_counts(value: bytes) -> tuple[int, list[int]]:
    """``(attempt, rows per chunk)`` of one manifest entry."""
    attempt, counts = msgpack.unpackb(value)
    return int(attempt), counts


def chunk_keys(keys: Keys, job_id: str, sections: Sequence[str],
               manifests: Sequence[Mapping[bytes, bytes]]) -> Iterator[tuple[str, str]]:
    """(chunk, columnar copy) key of every chunk the manifests of ``sections`` (in order) list."""
    for section, manifest in zip(sections, manifests):
        for unit, value in manifest.items():
            attempt, counts = manifest_counts(value)
            for part in range(len(counts)):
                chunk = keys.job_chunk(job_id, section, int(unit), part, attempt)
                yield chunk, keys.job_chunk_copy(job_id, section, int(unit), part, attempt)


def read_layout(redis: redis.Redis, keys: Keys, job_id: str, section: str,
                units_for_section: Sequence[int]) -> Layout:
    """Read the manifest (one HMGET) and lay out the longest committed prefix of units.

    Only a prefix is readable, so offsets never shift while later units commit.
    """
    if not units_for_section:
        return Layout([], [], 0, True)
    with redis_errors():
        packed = redis.hmget(keys.job_manifest(job_id, section), list(units_for_section))
    parts, starts, total, attempts = [], [], 0, {}
    for unit, value in zip(units_for_section, packed):
        if value is None:
            return Layout(parts, starts, total, False, attempts)
        attempts[unit], counts = manifest_counts(value)
        for part, count in enumerate(counts):
            parts.append((unit, part, count))
            starts.append(total)
            total += count
    return Layout(parts, starts, total, True, attempts)


def page(redis: redis.Redis, keys: Keys, job_id: str, section: str, offset: int, limit: int,
         units_for_section: Sequence[int], partial: bool, label: str | None = None) -> dict:
    """Read rows ``[offset, offset + limit)`` of one section.

    Args:
        redis(redis.Redis): client.
        keys(Keys): key names.
        job_id(str): the job.
        section(str): the section to read.
        offset(int): first row, >= 0.
        limit(int): page size, >= 1.
        units_for_section(Sequence[int]): the section's units in result order.
        partial(bool): allow reading the committed prefix of an unfinished section.
        label(str | None): the job named in errors (the job read, when its keys are
            another's: a reused result), else ``job_id``.

    Returns:
        dict: ``columns``, ``rows`` (dicts by column name), ``total`` (rows readable now),
        ``next_offset`` (None when no readable row follows; with ``complete`` false more
        may appear later at ``total``), ``complete``.

    Raises:
        InvalidParams: negative offset or a limit below 1.
        JobNotComplete: the section is not complete and ``partial`` is false.
        JobResultExpired: a chunk the manifest lists is gone.
    """
    if offset < 0 or limit < 1:
        raise InvalidParams(f"offset must be >= 0 and limit >= 1, got offset={offset} limit={limit}")
    label = label or job_id
    layout = read_layout(redis, keys, job_id, section, units_for_section)
    if not layout.complete and not partial:
        raise JobNotComplete(f"section {section} of job {label} is not complete")
    end = min(offset + limit, layout.total)
    columns: list[str] = []
    rows: list[dict] = []
    if offset < end:
        first = bisect.bisect_right(layout.starts, offset) - 1
        last = bisect.bisect_left(layout.starts, end) - 1
        wanted = [i for i in range(first, last + 1) if layout.parts[i][2] > 0]
        values = _get_chunks(redis, keys, job_id, section, [layout.parts[i] for i in wanted],
                             layout.attempts, label)
        for i, value in zip(wanted, values):
            columns, chunk_rows = decode_chunk(value)
            start = layout.starts[i]
            for row in chunk_rows[max(offset - start, 0):end - start]:
                rows.append(dict(zip(columns, row)))
    return {"columns": columns, "rows": rows, "total": layout.total,
            "next_offset": end if end < layout.total else None, "complete": layout.complete}


def _get_chunks(redis: redis.Redis, keys: Keys, job_id: str, section: str,
                parts: list[tuple[int, int, int]], attempts: dict[int, int], label: str) -> list[bytes]:
    """GET the chunks of ``parts`` in one pipeline; a missing one means the result expired."""
    if not parts:
        return []
    with redis_errors():
        pipe = redis.pipeline(transaction=False)
        for unit, part, _ in parts:
            pipe.get(keys.job_chunk(job_id, section, unit, part, attempts[unit]))
        values = pipe.execute()
    if any(v is None for v in values):
        raise JobResultExpired(f"result of job {label} section {section} has expired")
    return values
