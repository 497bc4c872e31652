"""The whole result of a job as NDJSON lines (DOMAIN.md section 4), one chunk at a time.

Line order: ``meta``, then per domain ``domain_start``, one ``records`` per stored
chunk and ``domain_end``, then ``warning`` (EVENTS_PARTIAL_FAILURE) when some domains
failed, then ``complete``. Every line is ``{"type": ..., ...}`` JSON followed by ``\\n``.
:func:`stream` checks up front that the result is complete and present, so the caller
can still answer 409/404; a chunk that expires mid-stream ends it with an ``error`` line.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import orjson

from tracebus.errors import TracebusError
from tracebus.jobs.results import Layout

#: Content type of the stream.
CONTENT_TYPE = "application/x-ndjson"


def line(kind: str, **fields) -> bytes:
    """One NDJSON line of type ``kind`` (UTF-8, compact, newline-terminated)."""
    return orjson.dumps({"type": kind, **fields}, option=orjson.OPT_APPEND_NEWLINE)


def stream(store, job_id: str, profile: str, domains: Sequence[str],
           failed_domains: Sequence[str] = ()) -> Iterator[bytes]:
    """The job's result as NDJSON lines.

    Args:
        store(JobStore): the job store.
        job_id(str): the job.
        profile(str): the job's profile (for ``meta``).
        domains(Sequence[str]): requested domains, in order.
        failed_domains(Sequence[str]): domains that failed; they are skipped and named in
            the ``warning`` line.

    Returns:
        Iterator[bytes]: the lines; it holds at most one decoded chunk at a time.

    Raises:
        JobNotComplete: a domain that did not fail is not fully committed.
        JobResultExpired: a chunk the manifest lists is gone.
    """
    failed = [d for d in domains if d in set(failed_domains)]
    layouts = store.layouts(job_id, [d for d in domains if d not in failed])
    return _lines(store, job_id, profile, list(domains), layouts, failed)


def _lines(store, job_id: str, profile: str, domains: list[str],
           layouts: dict[str, Layout], failed: list[str]) -> Iterator[bytes]:
    yield line("meta", job_id=job_id, profile=profile, domains=domains)
    total = 0
    try:
        for domain, layout in layouts.items():
            yield line("domain_start", domain=domain, total=layout.total)
            for batch, (columns, rows) in enumerate(store.iter_chunks(job_id, domain, layout)):
                data = [dict(zip(columns, row)) for row in rows]
                del rows
                yield line("records", domain=domain, batch=batch, count=len(data), data=data)
            total += layout.total
            yield line("domain_end", domain=domain, count=layout.total)
    except TracebusError as e:
        # Headers are already sent: the client learns of the failure from the last line.
        yield line("error", code=e.code, message=e.message)
        return
    if failed:
        yield line("warning", code="EVENTS_PARTIAL_FAILURE", failed_domains=failed)
    yield line("complete", total_records=total)
