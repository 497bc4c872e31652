"""An MSD job's result as the dashboard reads it: GET result and the NDJSON stream (MSD.md §4).

MSD stores no event rows (the original answers ``results[d].data = []`` with ``total``), so
both documents come from two small artifacts written by the reduce: ``aggregation`` and
``quality`` (the query's and each domain's quality_meta, and the rows each domain observed).
"""

from __future__ import annotations

from typing import Iterator

import orjson

from tracebus.jobs.errors import JobNotComplete, JobResultExpired
from tracebus.jobs.states import FINAL_STATES
from tracebus.trace.msd.job.plan import PROFILE, unpack

#: ``error`` of a result with failed domains (the original's words).
PARTIAL_ERROR = "one or more domains failed"


def is_msd(doc: dict) -> bool:
    """Whether a trace status document is an MSD job's."""
    return doc.get("profile") == PROFILE and doc.get("trace_query_id") is not None


def load(store, doc: dict) -> tuple[dict, dict]:
    """(aggregation, quality) of a finished MSD job.

    Raises:
        JobNotComplete: the job is still running.
        JobResultExpired: the job finished but its aggregation is gone (or was never made).
    """
    job_id = doc["job_id"]
    aggregation = unpack(store.get_artifact(job_id, "aggregation"))
    quality = unpack(store.get_artifact(job_id, "quality"))
    if aggregation is None or quality is None:
        if doc["state"] not in FINAL_STATES:
            raise JobNotComplete(f"job {job_id} is {doc['status']}", status=doc["status"])
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
        body.update(error=PARTIAL_ERROR, code="EVENTS_PARTIAL_FAILURE", failed_domains=failed)
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
        yield line("warning", code="EVENTS_PARTIAL_FAILURE", failed_domains=failed)
    yield line("quality_meta", quality_meta=quality["query"], domain_quality_meta=quality["domains"])
    yield line("complete", total_records=0)
