"""The whole result of a job as a stream of lines (DOMAIN.md section 4), one chunk at a time,
as NDJSON or in the binary wire format; of a finished job, or followed while it runs.

Line order: ``meta``, then per domain ``domain_start``, one ``records`` per stored
chunk and ``domain_end``, then ``warning`` (EVENTS_PARTIAL_FAILURE) when some domains
failed, then ``complete``. In NDJSON every line is ``{"type": ..., ...}`` JSON followed by
``\\n``; in the binary format (:data:`BINARY`, see :mod:`tracebus.jobs.wire`) every line is
the same map in msgpack, a ``records`` map carrying the stored chunk as it is (``chunk``)
instead of ``data``. :func:`stream` checks up front that the result is complete and
present, so the caller can still answer 409/404; a chunk that expires mid-stream ends it
with an ``error`` line.

:func:`follow` starts while the job runs: chunks go out as their units commit, in the
same order and batches as :func:`stream` (offsets never shift), and ``complete`` once
the job has reached its final state. ``domain_start.total`` is
null when the domain was still running; a domain that failed ends with ``domain_end``
carrying ``failed: true`` (its rows sent so far are not counted in ``complete``); a job
that is cancelled or fails ends with an ``error`` line (``JOB_CANCELLED``/``JOB_FAILED``).

These are the lines of a job whose sections are domains of rows; a kind whose result is
something else writes its own (:meth:`tracebus.trace.jobkind.JobKind.lines`) with :func:`ended`.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import orjson

from tracebus.errors import TracebusError
from tracebus.jobs import wire
from tracebus.jobs.chunkcodec import decode_slices
from tracebus.jobs.feed import ChunkFeed, Part
from tracebus.jobs.results import Layout
from tracebus.trace import jobview
from tracebus.trace.states import EVENTS_PARTIAL_FAILURE, ended_code

#: Content type of the stream.
CONTENT_TYPE = "application/x-ndjson"
#: Rows per piece of a ``records`` line (~100 KB of history): a line is written in pieces, so a
#: client that stops reading pins one piece in the API, not the chunk's whole line (~2 MB) and
#: its rows as objects (issue 39).
RECORDS_SLICE_ROWS = 64


def line(kind: str, **fields) -> bytes:
    """One NDJSON line of type ``kind`` (UTF-8, compact, newline-terminated)."""
    return orjson.dumps({"type": kind, **fields}, option=orjson.OPT_APPEND_NEWLINE)


class Ndjson:
    """NDJSON: each chunk is decoded and written as one ``records`` line, in pieces of
    :data:`RECORDS_SLICE_ROWS` rows (the same bytes as the line made at once)."""

    content_type = CONTENT_TYPE
    line = staticmethod(line)

    @staticmethod
    def records(domain: str, batch: int, part: Part) -> Iterator[bytes]:
        columns, slices = decode_slices(part.value, RECORDS_SLICE_ROWS)
        head = orjson.dumps({"type": "records", "domain": domain, "batch": batch, "count": part.rows, "data": []})
        piece = head[:-2]  # without the closing "]}"
        for rows in slices:
            piece += orjson.dumps([dict(zip(columns, row)) for row in rows])[1:-1]
            yield piece
            piece = b","
        yield b"]}\n" if piece == b"," else piece + b"]}\n"


class Binary:
    """The binary wire format: each stored chunk goes out as it is, behind a small header."""

    content_type = wire.CONTENT_TYPE
    line = staticmethod(wire.frame)

    @staticmethod
    def records(domain: str, batch: int, part: Part) -> Iterator[bytes]:
        yield wire.chunk_head("records", len(part.value), domain=domain, batch=batch, count=part.rows)
        yield part.value


#: The encodings by name.
NDJSON, BINARY = Ndjson(), Binary()


def stream(store, job_id: str, profile: str, domains: Sequence[str],
           failed_domains: Sequence[str] = (), encoding=NDJSON) -> Iterator[bytes]:
    """The job's result as lines.

    Args:
        store(JobStore): the job store.
        job_id(str): the job.
        profile(str): the job's profile (for ``meta``).
        domains(Sequence[str]): requested domains, in order.
        failed_domains(Sequence[str]): domains that failed; they are skipped and named in
            the ``warning`` line.
        encoding: :data:`NDJSON` or :data:`BINARY`.

    Returns:
        Iterator[bytes]: the lines; it holds at most one batch of chunks at a time.

    Raises:
        JobNotComplete: a domain that did not fail is not fully committed.
        JobResultExpired: a chunk the manifest lists is gone.
    """
    failed = [d for d in domains if d in set(failed_domains)]
    layouts = store.layouts(job_id, [d for d in domains if d not in failed])
    return _lines(store, job_id, profile, list(domains), layouts, failed, encoding)


def _lines(store, job_id: str, profile: str, domains: list[str],
           layouts: dict[str, Layout], failed: list[str], enc) -> Iterator[bytes]:
    yield enc.line("meta", job_id=job_id, profile=profile, domains=domains)
    feed = ChunkFeed(store, job_id)
    total = 0
    try:
        for domain, layout in layouts.items():
            yield enc.line("domain_start", domain=domain, total=layout.total)
            for batch, part in enumerate(feed.parts(domain, layout.parts, layout.attempts)):
                yield from enc.records(domain, batch, part)
            total += layout.total
            yield enc.line("domain_end", domain=domain, count=layout.total)
    except TracebusError as e:
        # Headers are already sent: the client learns of the failure from the last line.
        yield enc.line("error", code=e.code, message=e.message)
        return
    if failed:
        yield enc.line("warning", code=EVENTS_PARTIAL_FAILURE, failed_domains=failed)
    yield enc.line("complete", total_records=total)


def follow(store, doc: dict, encoding=NDJSON, max_s: float | None = None,
           render: Callable[[dict], dict] = jobview.render_status) -> Iterator[bytes]:
    """The job's result as lines, sent as its units commit (see the module docstring).

    Args:
        store(JobStore): the job store.
        doc(dict): the job's trace status document (``render`` of its status).
        encoding: :data:`NDJSON` or :data:`BINARY`.
        max_s(float | None): end with an ``error`` line (``FOLLOW_TIMEOUT``) after this long.
        render: the job kind's trace status document of a job-layer status (read again when a
            domain stops short, to tell a failed domain from a job that ended).
    """
    return _follow(store, doc, encoding, ChunkFeed(store, doc["job_id"], max_s=max_s), render)


def _follow(store, doc: dict, enc, feed: ChunkFeed, render) -> Iterator[bytes]:
    job_id, domains = doc["job_id"], list(doc["domains"])
    yield enc.line("meta", job_id=job_id, profile=doc["profile"], domains=domains)
    total = 0
    try:
        units = store.units_by_section(job_id)
        for domain in domains:
            yield enc.line("domain_start", domain=domain, total=feed.total_if_complete(domain, units[domain]))
            count = 0
            for batch, part in enumerate(feed.follow(domain, units[domain])):
                yield from enc.records(domain, batch, part)
                count += part.rows
            if feed.complete[domain]:
                total += count
                yield enc.line("domain_end", domain=domain, count=count)
                continue
            now = render(store.status(job_id))
            if domain not in now["failed_domains"]:
                yield ended(enc, now)
                return
            yield enc.line("domain_end", domain=domain, count=count, failed=True)
        feed.wait_final()  # the last unit settles just after its chunks are committed
        failed = [d for d in domains if not feed.complete[d]]
    except TracebusError as e:
        yield enc.line("error", code=e.code, message=e.message)
        return
    if failed:
        yield enc.line("warning", code=EVENTS_PARTIAL_FAILURE, failed_domains=failed)
    yield enc.line("complete", total_records=total)


def ended(enc, doc: dict) -> bytes:
    """The ``error`` line of a job that ended (cancelled or failed) before its result was whole."""
    return enc.line("error", code=ended_code(doc["state"]),
                    message=doc.get("error") or f"job {doc['job_id']} was {doc['state']} before its result was whole")
