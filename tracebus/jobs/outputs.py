"""Output side of :class:`tracebus.jobs.store.JobStore`: chunks, pages, partials, artifacts.

A mixin (like :class:`tracebus.jobs.reads.JobReads`) so an application reads and writes a
job's outputs through the store alone, never through key names or the Redis client:

* result chunks, written by a unit through :meth:`JobOutputs.chunk_writer` and read page
  by page (:meth:`JobOutputs.page`) or chunk by chunk (:meth:`JobOutputs.iter_chunks`);
* per-unit partial aggregates, committed with the unit's chunks in one fenced step and
  read back by the final reduce (:meth:`JobOutputs.iter_partials`), one at a time;
* artifacts: a value stored once for the whole job (:meth:`JobOutputs.put_artifact`), such
  as the final aggregation or a lookup every unit reads.

Everything written here expires with the job (``TRACE_JOB_TTL_SECONDS``) and gets a fresh
TTL when the job finishes. A job answered from a reused result reads the keys of the job that
ran it (:meth:`JobReads.data_id`, :mod:`tracebus.jobs.reuse`); its errors name the job read.
"""

from __future__ import annotations

import functools
from typing import Iterator, Sequence

from tracebus.engine.redis_errors import redis_errors
from tracebus.jobs import results
from tracebus.jobs.chunkcodec import decode_chunk, stream_chunk, stream_rows
from tracebus.jobs.errors import JobNotComplete, JobResultExpired
from tracebus.jobs.results import ChunkWriter, Layout

#: Field of the job hash listing the job's artifact names (so their TTL can be refreshed).
_ARTIFACT_FIELD = "artifact:"


class JobOutputs:
    """Writes and reads of job outputs (mixed into ``JobStore``)."""

    # -- chunks --------------------------------------------------------------------------------
    def chunk_writer(self, job_id: str, unit: int, attempt: int) -> ChunkWriter:
        """A writer for the chunks (and the partial) of one unit attempt."""
        section = self.plan(job_id).section_of(unit)
        return ChunkWriter(self.redis, self.keys, job_id, section, unit, attempt,
                           self.settings.job_ttl_s, max_rows=self.settings.stream_batch_rows,
                           wait=(self.settings.redis_wait_replicas, self.settings.redis_wait_timeout_ms),
                           columnar=bool(self.settings.columnar_copy),
                           charge=functools.partial(self.budget.charge, self.user_of(job_id), job_id))

    def page(self, job_id: str, section: str, offset: int, limit: int, partial: bool) -> dict:
        """Rows ``[offset, offset + limit)`` of one section (see :func:`results.page`)."""
        units = self.units_by_section(job_id)[section]
        return results.page(self.redis, self.keys, self.data_id(job_id), section, offset, limit, units, partial,
                            label=job_id)

    def layouts(self, job_id: str, sections: Sequence[str]) -> dict[str, Layout]:
        """The committed layout of each of ``sections``, every chunk checked present.

        Raises:
            JobNotComplete: a section is not fully committed.
            JobResultExpired: a chunk its manifest lists is gone.
        """
        units, data = self.units_by_section(job_id), self.data_id(job_id)
        out = {}
        for section in sections:
            layout = results.read_layout(self.redis, self.keys, data, section, units[section])
            if not layout.complete:
                raise JobNotComplete(f"section {section} of job {job_id} is not complete")
            out[section] = layout
        with redis_errors():
            pipe = self.redis.pipeline(transaction=False)
            for section, layout in out.items():
                for unit, part, _ in layout.parts:
                    pipe.exists(self.keys.job_chunk(data, section, unit, part, layout.attempts[unit]))
            present = pipe.execute()
        if not all(present):
            raise JobResultExpired(f"result of job {job_id} has expired")
        return out

    def iter_chunks(self, job_id: str, section: str, layout: Layout) -> Iterator[tuple[list, list]]:
        """``(columns, rows)`` of every chunk of ``layout`` in order, one GET each, so the
        caller holds one decoded chunk at a time.

        Raises:
            JobResultExpired: a chunk expired while being read.
        """
        for unit, part, _ in layout.parts:
            yield self.read_chunk(job_id, section, unit, part, layout.attempts[unit])

    def iter_chunk_rows(self, job_id: str, section: str, layout: Layout,
                        slice_bytes: int = 16 << 10) -> Iterator[tuple[list, Iterator[list]]]:
        """``(columns, rows)`` of every chunk of ``layout`` in order, each chunk read in
        ``slice_bytes`` slices and its rows decoded as they are iterated
        (:func:`~tracebus.jobs.chunkcodec.stream_chunk`): iterate a chunk's rows before the next.

        Raises (while iterated):
            JobResultExpired: a chunk expired while being read.
        """
        data = self.data_id(job_id)
        for unit, part, _ in layout.parts:
            key = self.keys.job_chunk(data, section, unit, part, layout.attempts[unit])
            yield stream_chunk(self._slices(key, slice_bytes, f"result of job {job_id} section {section}"))

    def unit_row_streams(self, job_id: str, section: str, layout: Layout,
                         slice_bytes: int = 16 << 10) -> list[Iterator[list]]:
        """One iterator of rows per unit of ``layout`` that stored any, in unit order: each reads
        its chunks in ``slice_bytes`` slices (GETRANGE) and decodes rows as they come
        (:func:`~tracebus.jobs.chunkcodec.stream_rows`), so merging every unit's rows holds a
        slice per unit, not a chunk.

        Raises (while iterated):
            JobResultExpired: a chunk expired while being read.
        """
        by_unit: dict[int, list[int]] = {}
        for unit, part, _ in layout.parts:
            by_unit.setdefault(unit, []).append(part)

        data = self.data_id(job_id)

        def rows_of(unit: int, parts: list[int]) -> Iterator[list]:
            for part in parts:
                key = self.keys.job_chunk(data, section, unit, part, layout.attempts[unit])
                yield from stream_rows(self._slices(key, slice_bytes, f"result of job {job_id} section {section}"))

        return [rows_of(unit, parts) for unit, parts in by_unit.items()]

    def _slices(self, key: str, slice_bytes: int, what: str) -> Iterator[bytes]:
        start = 0
        while True:
            with redis_errors():
                piece = self.redis.getrange(key, start, start + slice_bytes - 1)
            if not piece:
                if start == 0:
                    raise JobResultExpired(f"{what} has expired")
                return
            yield piece
            if len(piece) < slice_bytes:
                return
            start += slice_bytes

    def read_chunk(self, job_id: str, section: str, unit: int, part: int,
                   attempt: int) -> tuple[list, list]:
        """``(columns, rows)`` of one stored chunk (a part of ``unit``'s result, written by its
        committed ``attempt``: :attr:`Layout.attempts`).

        Raises:
            JobResultExpired: the chunk is gone.
        """
        with redis_errors():
            value = self.redis.get(self.keys.job_chunk(self.data_id(job_id), section, unit, part, attempt))
        if value is None:
            raise JobResultExpired(f"result of job {job_id} section {section} has expired")
        return decode_chunk(value)

    # -- partial aggregates ----------------------------------------------------------------------
    def iter_partials(self, job_id: str, batch: int = 16) -> Iterator[tuple[int, bytes]]:
        """``(unit, packed partial)`` of every committed unit, ``batch`` per round trip."""
        key = self.keys.job_partials(self.data_id(job_id))
        with redis_errors():
            units = sorted(int(u) for u in self.redis.hkeys(key))
        for i in range(0, len(units), batch):
            wanted = units[i:i + batch]
            with redis_errors():
                values = self.redis.hmget(key, wanted)
            for unit, value in zip(wanted, values):
                if value is not None:
                    yield unit, value

    def partial(self, job_id: str, unit: int) -> bytes | None:
        """The packed partial of ``unit``, or None (not committed: running, failed, or expired)."""
        with redis_errors():
            return self.redis.hget(self.keys.job_partials(self.data_id(job_id)), unit)

    def charge(self, job_id: str, nbytes: int) -> None:
        """Charge ``nbytes`` a job's kind is about to store under keys of its own (with the job's
        TTL) to the budget of the job's user (:mod:`tracebus.jobs.budget`).

        Raises:
            BudgetExceeded: past the user's budget (the unit then fails its job).
        """
        self.budget.charge(self.user_of(job_id), job_id, nbytes, self.budget.expires_in(self.settings.job_ttl_s))

    # -- artifacts -----------------------------------------------------------------------------
    def put_artifact(self, job_id: str, name: str, value: bytes) -> None:
        """Store ``value`` as the job's artifact ``name`` (replacing it), with the job's TTL;
        the job hash's TTL is renewed with it, so the artifact never outlives the job's status
        (a unit may store one after the job was cancelled)."""
        ttl = self.settings.job_ttl_s
        self.budget.charge(self.user_of(job_id), job_id, len(value), self.budget.expires_in(ttl))
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.set(self.keys.job_artifact(job_id, name), value, ex=ttl)
            pipe.hset(self.keys.job(job_id), _ARTIFACT_FIELD + name, 1)
            pipe.expire(self.keys.job(job_id), ttl)
            pipe.execute()

    def get_artifact(self, job_id: str, name: str) -> bytes | None:
        """The job's artifact ``name``, or None (never stored, or expired)."""
        with redis_errors():
            return self.redis.get(self.keys.job_artifact(self.data_id(job_id), name))

    def artifact_slices(self, job_id: str, name: str, slice_bytes: int) -> Iterator[bytes]:
        """The job's artifact ``name`` in slices of at most ``slice_bytes`` (GETRANGE), so a
        reader never holds a large one whole; nothing when it is absent.

        Raises:
            JobResultExpired: the artifact expired while it was being read.
        """
        key = self.keys.job_artifact(self.data_id(job_id), name)
        with redis_errors():
            size = self.redis.strlen(key)
        for start in range(0, size, slice_bytes):
            with redis_errors():
                part = self.redis.getrange(key, start, min(start + slice_bytes, size) - 1)
            if not part:
                raise JobResultExpired(f"artifact {name} of job {job_id} expired while it was read")
            yield part

    def artifact_keys(self, job: dict[str, str], job_id: str) -> list[str]:
        """Keys of the artifacts listed in a decoded job hash."""
        return [self.keys.job_artifact(job_id, f[len(_ARTIFACT_FIELD):])
                for f in job if f.startswith(_ARTIFACT_FIELD)]
