"""An MSD job's status and result as the dashboard reads them: GET result and the NDJSON stream (MSD.md §4).

MSD stores no event rows (the original answers ``results[d].data = []`` with ``total``), so
both documents come from two small artifacts written by the reduce: ``aggregation`` and
``quality`` (the query's and each domain's quality_meta, and the rows each domain observed).
Followed, ``meta`` goes out at once and the rest when the job ends.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import orjson

from tracebus.errors import TracebusError
from tracebus.jobs.errors import JobNotComplete, JobResultExpired
from tracebus.jobs.feed import ChunkFeed
from tracebus.jobs.states import FINAL_STATES, RESULT_STATES, JobState
from tracebus.trace import jobview, ndjson
from tracebus.trace.msd.job.plan import INTERNAL_SECTIONS, unpack
from tracebus.trace.states import EVENTS_PARTIAL_FAILURE, PARTIAL_ERROR, V1_STATUS



def status(raw: dict) -> dict:
    """An MSD job's trace status document: it shows its event domains and seed count, and a
    failed internal section (detection, contexts, detail, the reduce) fails the job once it
    has ended, as an aggregation error does in the original (not while its other units run:
    a poller stops at ``failed``)."""
    out = jobview.render_status(raw)
    msd = raw["app"]["msd"]
    failed = list(out["failed_domains"])
    out.update(domains=list(msd["domains"]), cid_count=msd["seed_count"], trace_query_id=msd["trace_query_id"],
               failed_domains=[d for d in failed if d in msd["domains"]])
    broken = [s for s in failed if s in INTERNAL_SECTIONS]
    if broken and out["state"] in FINAL_STATES:
        out.update(status=V1_STATUS[JobState.FAILED], state=JobState.FAILED.value,
                   error=out.get("error") or f"MSD aggregation failed ({', '.join(broken)} units failed)")
        out.pop("code", None)
    elif not out["failed_domains"]:
        out.pop("code", None)
    return out


def load(store, doc: dict) -> tuple[dict, dict]:
    """(aggregation, quality) of a finished MSD job.

    Raises:
        JobNotComplete: the job is still running (an aggregation stored meanwhile, or left by
            the run before a retry, may not be the one it ends with).
        JobResultExpired: the job finished but its aggregation is gone (or was never made).
    """
    job_id = doc["job_id"]
    if doc["state"] not in FINAL_STATES:
        raise JobNotComplete(f"job {job_id} is {doc['status']}", status=doc["status"])
    aggregation = unpack(store.get_artifact(job_id, "aggregation"))
    quality = unpack(store.get_artifact(job_id, "quality"))
    if aggregation is None or quality is None:
        raise JobResultExpired(f"the aggregation of job {job_id} is not available")
    return aggregation, quality


def document(store, doc: dict, only: str | None = None) -> Iterator[bytes]:
    """The GET result document of an MSD job (one JSON object, as a one-chunk stream)."""
    aggregation, quality = load(store, doc)
    failed = list(doc.get("failed_domains") or ())
    domain_metas = quality["domains"]
    results = {d: {"data": [], "count": 0, "total": quality["observed"].get(d, 0),
                   "quality_meta": domain_metas.get(d)}
               for d in doc["domains"] if d not in failed and (only is None or d == only)}
    body = {"stage": "events", "job_id": doc["job_id"], "results": results, "aggregation": aggregation,
            "quality_meta": quality["query"], "domain_quality_meta": domain_metas,
            "query_id": doc["job_id"], "trace_query_id": doc["trace_query_id"]}
    if failed:
        body.update(error=PARTIAL_ERROR, code=EVENTS_PARTIAL_FAILURE, failed_domains=failed)
    return iter([orjson.dumps(body)])


def lines(store, doc: dict, line) -> Iterator[bytes]:
    """The NDJSON lines of an MSD job: meta, each domain's start/end (no records), aggregation,
    warning (failed domains), quality_meta, complete."""
    aggregation, quality = load(store, doc)
    return _lines(doc, aggregation, quality, line)


def meta(doc: dict, line) -> bytes:
    """The ``meta`` line of an MSD job (known from its submit on)."""
    return line("meta", job_id=doc["job_id"], profile=doc["profile"], domains=doc["domains"],
                query_id=doc["job_id"], trace_query_id=doc["trace_query_id"])


def _lines(doc: dict, aggregation: dict, quality: dict, line) -> Iterator[bytes]:
    failed = list(doc.get("failed_domains") or ())
    yield meta(doc, line)
    for domain in doc["domains"]:
        if domain in failed:
            continue
        yield line("domain_start", domain=domain, total=quality["observed"].get(domain, 0),
                   quality_meta=quality["domains"].get(domain))
        yield line("domain_end", domain=domain, count=0)
    yield line("aggregation", data=aggregation)
    if failed:
        yield line("warning", code=EVENTS_PARTIAL_FAILURE, failed_domains=failed)
    yield line("quality_meta", quality_meta=quality["query"], domain_quality_meta=quality["domains"])
    yield line("complete", total_records=0)


def follow_lines(store, doc: dict, enc, max_s: float | None) -> Iterator[bytes]:
    """The lines of an MSD job followed from its submit: ``meta`` at once, the rest when it ends
    (an ``error`` line if it failed or was cancelled)."""
    feed = ChunkFeed(store, doc["job_id"], max_s=max_s)
    yield meta(doc, enc.line)  # known at submit
    try:
        feed.wait_final()
        now = status(store.status(doc["job_id"]))
        if now["state"] not in RESULT_STATES:  # failed or cancelled: it has ended
            yield ndjson.ended(enc, now)
            return
        yield from itertools.islice(lines(store, now, enc.line), 1, None)
    except TracebusError as e:
        yield enc.line("error", code=e.code, message=e.message)


def follow_document(store, doc: dict, only: str | None, max_s: float | None) -> Iterator[bytes]:
    """The GET result document of an MSD job followed from its submit: written when it ends."""
    ChunkFeed(store, doc["job_id"], max_s=max_s).wait_final()
    yield from document(store, status(store.status(doc["job_id"])), only)
