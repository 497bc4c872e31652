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
import redis

from ..errors import JobNotComplete, JobResultExpired, TracebusError
from ..keys import Keys
from .chunkcodec import decode_chunk
from .luascripts import redis_errors
from .results import Layout, read_layout

#: Content type of the stream.
CONTENT_TYPE = "application/x-ndjson"


def line(kind: str, **fields) -> bytes:
    """One NDJSON line of type ``kind`` (UTF-8, compact, newline-terminated)."""
    return orjson.dumps({"type": kind, **fields}, option=orjson.OPT_APPEND_NEWLINE)


def stream(redis: redis.Redis, keys: Keys, job_id: str, profile: str, domains: Sequence[str],
           units_by_domain: dict[str, Sequence[int]],
           failed_domains: Sequence[str] = ()) -> Iterator[bytes]:
    """The job's result as NDJSON lines.

    Args:
        redis(redis.Redis): client.
        keys(Keys): key names.
        job_id(str): the job.
        profile(str): the job's profile (for ``meta``).
        domains(Sequence[str]): requested domains, in order.
        units_by_domain(dict[str, Sequence[int]]): each domain's units in result order.
        failed_domains(Sequence[str]): domains that failed; they are skipped and named in
            the ``warning`` line.

    Returns:
        Iterator[bytes]: the lines; it holds at most one decoded chunk at a time.

    Raises:
        JobNotComplete: a domain that did not fail is not fully committed.
        JobResultExpired: a chunk the manifest lists is gone.
    """
    failed = [d for d in domains if d in set(failed_domains)]
    layouts = {}
    for domain in domains:
        if domain in failed:
            continue
        layout = read_layout(redis, keys, job_id, domain, units_by_domain[domain])
        if not layout.complete:
            raise JobNotComplete(f"domain {domain} of job {job_id} is not complete")
        layouts[domain] = layout
    check_present(redis, keys, job_id, layouts)
    return _lines(redis, keys, job_id, profile, list(domains), layouts, failed)


def check_present(redis: redis.Redis, keys: Keys, job_id: str, layouts: dict[str, Layout]) -> None:
    """Raise JobResultExpired unless every chunk of ``layouts`` still exists (one pipeline)."""
    with redis_errors():
        pipe = redis.pipeline(transaction=False)
        for domain, layout in layouts.items():
            for unit, part, _ in layout.parts:
                pipe.exists(keys.job_chunk(job_id, domain, unit, part))
        present = pipe.execute()
    if not all(present):
        raise JobResultExpired(f"result of job {job_id} has expired")


def _lines(redis: redis.Redis, keys: Keys, job_id: str, profile: str, domains: list[str],
           layouts: dict[str, Layout], failed: list[str]) -> Iterator[bytes]:
    yield line("meta", job_id=job_id, profile=profile, domains=domains)
    total = 0
    try:
        for domain, layout in layouts.items():
            yield line("domain_start", domain=domain, total=layout.total)
            for batch, (unit, part, _) in enumerate(layout.parts):
                with redis_errors():
                    value = redis.get(keys.job_chunk(job_id, domain, unit, part))
                if value is None:
                    raise JobResultExpired(f"result of job {job_id} domain {domain} has expired")
                columns, rows = decode_chunk(value)
                data = [dict(zip(columns, row)) for row in rows]
                del value, rows
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
