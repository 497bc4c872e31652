"""The trace-events job kind: an events request of any profile but MSD's, and its units.

The request is checked (:func:`tracebus.trace.request.check`), answered now up to
``TRACE_ASYNC_CID_THRESHOLD`` CIDs (the original 200 body, streamed chunk by chunk) and above
it admitted as a job: one section per domain, the CIDs as items, ``TRACE_CHUNK_CIDS`` per unit.
A unit streams its domain's rows for its CID chunk from the source, batch by batch, into the
unit's fenced chunks, so memory is bounded by one batch, never by the job. Transient source
errors are retried with backoff by the retries middleware; a permanent one
(``SourceError.retryable`` false) fails the unit at once, and its domain goes partial. The
status, stream, full result and export are the :class:`~tracebus.trace.jobkind.JobKind` defaults.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Iterator

import orjson

from tracebus.jobs.spec import JobSpec
from tracebus.trace import coltypes, kinds, request
from tracebus.trace.domains import DOMAINS
from tracebus.trace.events import jobs_domain
from tracebus.trace.jobkind import JobKind
from tracebus.trace.request import Request
from tracebus.trace.routes import Env
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.settings import TraceSettings

log = logging.getLogger(__name__)

#: The actor that runs every unit of an events job (recorded in each job).
ACTOR_NAME = "trace_unit"


def to_spec(req: Request, chunk_cids: int, queue: str, actor_name: str, result_key: str = "") -> JobSpec:
    """The job of ``req``: one section per domain, the CIDs as items, ``chunk_cids`` per unit;
    ``result_key``: its kind's fingerprint for reuse ("": none)."""
    return JobSpec(kind=request.JOB_KIND, user=req.user, sections=tuple(req.domains), items=req.container_ids,
                   chunk_items=chunk_cids, queue=queue, actor_name=actor_name,
                   fingerprint=request.fingerprint(req), result_key=result_key, fresh=req.fresh,
                   app={"profile": req.profile, "params": req.params})


class EventsKind(JobKind):
    """Plain trace-events jobs (see the module docstring)."""

    name = "events"
    actor_name = ACTOR_NAME
    profiles = None  # every profile no other kind serves (an unknown one is refused by parse)
    paced = True
    #: The query-tool page's profiles: ``query_tool_reverse`` lets the caller choose any domain.
    profile_domains = {"query_tool": ("history", "materials", "rejects", "holds", "jobs"),
                       "query_tool_reverse": DOMAINS}
    #: Their lineage: the original's forward tree, and its reverse tree (the query-tool page).
    profile_lineage = {"query_tool": "forward", "query_tool_reverse": "backward"}
    #: CPU seconds a 1,000-CID unit of each domain took in one process (the 114K trace of the
    #: scale-1 sample, every unit of the job run in turn, 2026-12-04): only their ratios are
    #: used, for a domain the recent jobs did not run (:meth:`tracebus.jobs.pace.Pace.unit_seconds`).
    unit_weights = MappingProxyType({"history": 0.077, "materials": 0.019, "rejects": 0.033, "holds": 0.006,
                                     "jobs": 0.005})

    def parse(self, body, user: str, settings: TraceSettings) -> Request:
        return request.check(body, user, settings.events_cid_limit)[1]

    def fingerprint(self, req: Request, settings: TraceSettings) -> str:
        """The profile, the domains and the CIDs in the request's order (which orders the
        result), the params; the user does not matter (:attr:`caller_dependent` is False)."""
        return self.result_key(settings, req.user, req.profile, req.domains, req.container_ids, req.params)

    def submit(self, req: Request, env: Env) -> str:
        spec = to_spec(req, env.settings.chunk_cids, env.settings.queue, self.actor_name,
                       self.fingerprint(req, env.settings))
        job_id = env.store.create(spec)
        log.info("job %s submitted: %s, %d cids, domains %s, user %s", job_id, req.profile, req.cid_count,
                 ",".join(req.domains), req.user, extra={"job_id": job_id, "user": req.user})
        env.dispatcher.start(job_id)
        return job_id

    def run_sync(self, req: Request, source, settings: TraceSettings) -> Iterator[bytes]:
        """``{"stage": "events", "results": {domain: {"data": [...], "count": n}}, "aggregation": null}``
        (memory: one batch)."""
        yield b'{"stage":"events","results":{'
        for i, domain in enumerate(req.domains):
            yield (b"," if i else b"") + orjson.dumps(domain) + b':{"data":['
            count = 0
            for start in range(0, req.cid_count, settings.chunk_cids):
                cids = req.container_ids[start:start + settings.chunk_cids]
                for columns, rows in source.fetch(domain, cids, settings.fetchmany_rows):
                    body = b",".join(orjson.dumps(dict(zip(columns, row))) for row in rows)
                    if body:
                        yield (b"," if count else b"") + body
                        count += len(rows)
            yield b'],"count":' + str(count).encode() + b"}"
        yield b'},"aggregation":null}'

    def run_unit(self, unit: TraceUnit) -> None:
        """Fetch one domain's rows for one CID chunk into the unit's result (typed by
        :mod:`tracebus.trace.coltypes`, so each chunk gets its columnar copy; the jobs domain's
        from one read of DW_MES_JOB per job, :mod:`tracebus.trace.events.jobs_domain`)."""
        unit.set_column_types(coltypes.types_of(unit.section))
        if unit.section == jobs_domain.DOMAIN:
            jobs_domain.run(unit, unit)  # the unit is its own runtime: it carries settings and source
            return
        for columns, rows in unit.source.fetch(unit.section, unit.input, unit.settings.fetchmany_rows):
            unit.write(columns, rows)


EVENTS = kinds.register(EventsKind())
