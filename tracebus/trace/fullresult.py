"""The whole result of a job as one JSON document in the original's shape, written as a stream.

``GET /api/trace/job/{id}/result`` without ``domain`` (or with ``limit=0``) answers, like
the original (MSD.md section 4)::

    {"stage": "events", "job_id", "results": {d: {"data": [...], "count", "total", "quality_meta"}},
     "aggregation": null, "quality_meta", "domain_quality_meta", "query_id", "trace_query_id",
     ["error", "code": "EVENTS_PARTIAL_FAILURE", "failed_domains"]}

The document is produced chunk by chunk: each stored chunk is read, encoded and yielded
before the next one is read, so the API holds one chunk whatever the result's size. The
rows are those of the pages of ``/result`` in the same order. Failed domains have no
``results`` entry; they are named in ``failed_domains`` and ``domain_quality_meta``. A
domain the job does not have gives nothing (``results: {}`` when it was the only one
asked for), as in the original. :func:`stream` checks completeness and presence before
returning, so 409/404 can still be answered; a chunk that vanishes mid-stream cuts the
body short (the status is already sent).
"""

from __future__ import annotations

from typing import Iterator

import orjson

from tracebus.jobs.results import Layout
from tracebus.trace import quality
from tracebus.trace.msdjob import views as msdviews

#: ``error`` of a result with failed domains (the original's words).
PARTIAL_ERROR = "one or more domains failed"


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
    if msdviews.is_msd(doc):
        return msdviews.document(store, doc, only)
    domains, failed = list(doc["domains"]), list(doc.get("failed_domains") or ())
    wanted = [d for d in domains if d not in failed and (only is None or d == only)]
    layouts = store.layouts(doc["job_id"], wanted)
    return _document(store, doc, domains, failed, layouts, offset, limit)


def _document(store, doc: dict, domains: list[str], failed: list[str],
              layouts: dict[str, Layout], offset: int, limit: int | None) -> Iterator[bytes]:
    job_id = doc["job_id"]
    yield b'{"stage":"events","job_id":' + orjson.dumps(job_id) + b',"results":{'
    for i, (domain, layout) in enumerate(layouts.items()):
        end = layout.total if limit is None else min(layout.total, offset + limit)
        yield (b"," if i else b"") + orjson.dumps(domain) + b':{"data":['
        yield from _rows(store, job_id, domain, layout, offset, end)
        meta = quality.domain_meta(domain, layout.total, False)
        yield (b'],"count":' + str(max(0, end - offset)).encode() + b',"total":' + str(layout.total).encode()
               + b',"quality_meta":' + orjson.dumps(meta) + b"}")
    domain_metas = {d: quality.domain_meta(d, layouts[d].total if d in layouts else None, d in failed)
                    for d in domains if d in layouts or d in failed}
    tail = {"aggregation": None, "quality_meta": quality.query_meta(domains, failed),
            "domain_quality_meta": domain_metas, "query_id": job_id, "trace_query_id": None}
    if failed:
        tail.update(error=PARTIAL_ERROR, code="EVENTS_PARTIAL_FAILURE", failed_domains=failed)
    yield b"}," + orjson.dumps(tail)[1:]


def _rows(store, job_id: str, domain: str, layout: Layout, offset: int, end: int) -> Iterator[bytes]:
    """Rows ``[offset, end)`` of one domain as comma-separated JSON objects, one chunk at a time."""
    first = True
    for (unit, part, count), start in zip(layout.parts, layout.starts):
        if count == 0 or start + count <= offset:
            continue
        if start >= end:
            break
        columns, rows = store.read_chunk(job_id, domain, unit, part, layout.attempts[unit])
        rows = rows[max(offset - start, 0):end - start]
        if rows:
            body = orjson.dumps([dict(zip(columns, row)) for row in rows])[1:-1]
            yield (b"" if first else b",") + body
            first = False
        del rows
