"""The whole result of a job as one JSON document in the original's shape, written as a stream.

``GET /api/trace/job/{id}/result`` without ``domain`` (or with ``limit=0``) answers, like
the original (MSD.md section 4)::

    {"stage": "events", "job_id", "results": {d: {"data": [...], "count", "total", "quality_meta"}},
     "aggregation": null, "quality_meta", "domain_quality_meta", "query_id", "trace_query_id",
     ["error", "code": "EVENTS_PARTIAL_FAILURE", "failed_domains"]}

The document is produced chunk by chunk: each stored chunk is read, then its rows decoded
and written a slice at a time before the next one is read, so the API holds a stored chunk
and a slice of rows whatever the result's size. The
rows are those of the pages of ``/result`` in the same order. Failed domains have no
``results`` entry; they are named in ``failed_domains`` and ``domain_quality_meta``. A
domain the job does not have gives nothing (``results: {}`` when it was the only one
asked for), as in the original. :func:`stream` checks completeness and presence before
returning, so 409/404 can still be answered; a chunk that vanishes mid-stream cuts the
body short (the status is already sent).

:func:`follow` writes the same document while the job runs, each domain's rows as its units
commit (chunks read ahead in pipelined batches, see :class:`tracebus.jobs.feed.ChunkFeed`).
A domain found failed when its rows stop keeps the rows sent so far, with a ``failed``
quality_meta, and is named in ``failed_domains``; a job cancelled or failed meanwhile ends
the document with ``error`` and ``code`` (``JOB_CANCELLED``/``JOB_FAILED``) in the tail.

This is the document of a job whose sections are domains of rows; a kind whose result is
something else writes its own (:meth:`tracebus.trace.jobkind.JobKind.document`).
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator

import orjson

from tracebus.jobs.chunkcodec import pieces_of, stream_chunk
from tracebus.jobs.contract import batched
from tracebus.jobs.feed import ChunkFeed, Part
from tracebus.jobs.results import Layout
from tracebus.trace import jobview, quality
from tracebus.trace.states import EVENTS_PARTIAL_FAILURE, PARTIAL_ERROR, ended_code

#: ``error`` of a result with failed domains (the original's words).


def stream(store, doc: dict, only: str | None = None, offset: int = 0,
           limit: int | None = None) -> Iterator[bytes]:
    """The job's result document as a stream of JSON fragments.

    Args:
        store(JobStore): the job store.
        doc(dict): the job's status document (job_id, domains, failed_domains).
        only(str | None): restrict ``results`` to this domain (``{}`` if the job lacks it).
        offset(int): first row of each domain given.
        limit(int | None): rows per domain at most; None: all.

    Raises:
        JobNotComplete: a domain that did not fail is not fully committed.
        JobResultExpired: a chunk the manifest lists is gone.
    """
    domains, failed = list(doc["domains"]), list(doc.get("failed_domains") or ())
    wanted = [d for d in domains if d not in failed and (only is None or d == only)]
    layouts = store.layouts(doc["job_id"], wanted)
    return _document(store, doc, domains, failed, layouts, offset, limit)


def _document(store, doc: dict, domains: list[str], failed: list[str],
              layouts: dict[str, Layout], offset: int, limit: int | None) -> Iterator[bytes]:
    job_id = doc["job_id"]
    feed = ChunkFeed(store, job_id)
    yield _head(job_id)
    for i, (domain, layout) in enumerate(layouts.items()):
        end = layout.total if limit is None else min(layout.total, offset + limit)
        yield _domain_open(i, domain)
        wanted = [(p, s) for p, s in zip(layout.parts, layout.starts) if p[2] and s + p[2] > offset and s < end]
        parts = feed.parts(domain, [p for p, _ in wanted], layout.attempts)
        yield from _rows(zip([s for _, s in wanted], parts), offset, end)
        yield _domain_close(domain, max(0, end - offset), layout.total, False)
    domain_metas = {d: quality.domain_meta(d, layouts[d].total if d in layouts else None, d in failed)
                    for d in domains if d in layouts or d in failed}
    yield _tail(job_id, domains, failed, domain_metas)


def follow(store, doc: dict, only: str | None = None, offset: int = 0, limit: int | None = None,
           max_s: float | None = None, render: Callable[[dict], dict] = jobview.render_status) -> Iterator[bytes]:
    """The job's result document, written while the job runs (see the module docstring).

    Args: as :func:`stream`, and ``max_s``: give up (cut the body short) after this long;
    ``render``: the job kind's trace status document of a job-layer status.
    """
    return _follow(store, doc, only, offset, limit, ChunkFeed(store, doc["job_id"], max_s=max_s), render)


def _follow(store, doc: dict, only: str | None, offset: int, limit: int | None,
            feed: ChunkFeed, render) -> Iterator[bytes]:
    job_id, domains = doc["job_id"], list(doc["domains"])
    units = store.units_by_section(job_id)
    yield _head(job_id)
    failed, metas, ended = [], {}, None
    for i, domain in enumerate(d for d in domains if only is None or d == only):
        yield _domain_open(i, domain)
        counted = _Counted(feed.follow(domain, units[domain]))
        yield from _rows(counted, offset, None if limit is None else offset + limit)
        total, whole = counted.rows, feed.complete[domain]
        sent = max(0, min(total, total if limit is None else offset + limit) - offset)
        yield _domain_close(domain, sent, total, not whole)
        metas[domain] = quality.domain_meta(domain, total, not whole)
        if not whole:
            now = render(store.status(job_id))
            if domain not in now["failed_domains"]:
                ended = now
                break
            failed.append(domain)
    if ended is None:
        feed.wait_final()
        now = render(store.status(job_id))
        failed += [d for d in now["failed_domains"] if d not in failed and d in domains]
        metas.update({d: quality.domain_meta(d, None, True) for d in failed if d not in metas})
    yield _tail(job_id, domains, failed, {d: metas[d] for d in domains if d in metas}, ended)


class _Counted:
    """The parts of a followed domain, each with its first row's offset; ``rows`` so far."""

    def __init__(self, parts: Iterable[Part]):
        self.parts, self.rows = parts, 0

    def __iter__(self) -> Iterator[tuple[int, Part]]:
        for part in self.parts:
            start, self.rows = self.rows, self.rows + part.rows
            yield start, part


def _head(job_id: str) -> bytes:
    return b'{"stage":"events","job_id":' + orjson.dumps(job_id) + b',"results":{'


def _domain_open(i: int, domain: str) -> bytes:
    return (b"," if i else b"") + orjson.dumps(domain) + b':{"data":['


def _domain_close(domain: str, count: int, total: int, failed: bool) -> bytes:
    meta = quality.domain_meta(domain, total, failed)
    return (b'],"count":' + str(count).encode() + b',"total":' + str(total).encode()
            + b',"quality_meta":' + orjson.dumps(meta) + b"}")


def _tail(job_id: str, domains: list[str], failed: list[str], domain_metas: dict,
          ended: dict | None = None) -> bytes:
    tail = {"aggregation": None, "quality_meta": quality.query_meta(domains, failed),
            "domain_quality_meta": domain_metas, "query_id": job_id, "trace_query_id": None}
    if failed:
        tail.update(error=PARTIAL_ERROR, code=EVENTS_PARTIAL_FAILURE, failed_domains=failed)
    if ended is not None:
        tail.update(error=ended.get("error") or f"job {job_id} was {ended['state']} before its result was whole",
                    code=ended_code(ended["state"]))
    return b"}," + orjson.dumps(tail)[1:]


def _rows(parts: Iterable, offset: int, end: int | None) -> Iterator[bytes]:
    """Rows ``[offset, end)`` (``end`` None: to the last) of ``(first row, Part)`` pairs in
    order, as comma-separated JSON objects, a chunk decoded row by row as it is written and
    :data:`~tracebus.jobs.contract.SLICE_ROWS` rows at a time (a reader that stops reading
    holds the stored chunk and those rows, not the chunk decoded and encoded)."""
    first = True
    for start, part in parts:
        if start + part.rows <= offset or (end is not None and start >= end):
            continue
        columns, rows = stream_chunk(pieces_of(part.value))
        wanted = itertools.islice(rows, max(offset - start, 0), None if end is None else max(end - start, 0))
        for batch in batched(orjson.dumps(dict(zip(columns, row))) for row in wanted):
            yield (b"" if first else b",") + b",".join(batch)
            first = False
