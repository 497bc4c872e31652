"""The trace service: the operations behind the HTTP API and the CLI.

It hands a request to the job kind that serves its profile (:mod:`tracebus.trace.kinds`), which
checks it and says whether it is answered now or a job; it admits jobs (quota, single-flight)
through the kind, and answers reads (status, pages, NDJSON stream, full result, export,
progress) scoped to the calling user, each through the job's kind: another user's job is "not
found". No HTTP here; ``api/`` maps errors to responses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Callable, Iterator

from tracebus.engine.broker import Broker
from tracebus.errors import InvalidParams
from tracebus.jobs import export
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.feed import ChunkFeed
from tracebus.jobs import pace as job_pace
from tracebus.jobs.errors import JobNotComplete, JobNotFound, JobStateConflict
from tracebus.jobs.store import JobStore
from tracebus.jobs.states import FINAL_STATES
from tracebus.trace import installed, kinds, ndjson, owners
from tracebus.trace.jobkind import JobKind
from tracebus.trace.request import JOB_KIND, Request
from tracebus.trace.lineage_cache import LineageCache
from tracebus.trace.now_or_job import NowOrJob
from tracebus.trace.routes import Env
from tracebus.trace.settings import TraceSettings
from tracebus.trace.sources import EventSource, open_source
from tracebus.trace.states import listed_states

__all__ = ["TraceService", "Request", "estimate_seconds", "installed"]

log = logging.getLogger(__name__)

#: Rough seconds of one worker per unit, for ``estimated_seconds``. Timed with ``up`` at
#: scale 1.0 on two cores and two workers (issue 26): 232 units (two domains) in 6 s and 580
#: (five) in 16 s, 0.05-0.1 s each; 0.5 had said 58 s and 145 s.
SECONDS_PER_UNIT = 0.06
#: Chunks an export reads per round trip. One, as the streams (:data:`tracebus.jobs.feed.READ_AHEAD_CHUNKS`):
#: an export whose client stops reading pins what it read ahead, and 4 msgpack chunks of history
#: (~180 KB each) were most of what an unread CSV or Arrow export held (issue 39).
EXPORT_READ_AHEAD = 1


def estimate_seconds(cid_count: int, n_domains: int, chunk_cids: int, workers: int) -> int:
    """The 202's ``estimated_seconds``: units times :data:`SECONDS_PER_UNIT` over the workers."""
    units = -(-cid_count // chunk_cids) * n_domains
    return max(1, round(units * SECONDS_PER_UNIT / max(1, workers)))


class TraceService:
    """Trace-events operations.

    Args:
        settings(TraceSettings): thresholds, limits, TTLs, the queue.
        broker(Broker): the queue (its Redis also holds job state and results).
        source_factory: builds an event source for the synchronous path.
    """

    def __init__(self, settings: TraceSettings, broker: Broker,
                 source_factory: Callable[[TraceSettings], EventSource] = open_source):
        self.settings = settings
        self.store = JobStore(broker.client, settings)
        self.dispatcher = Dispatcher(broker, self.store)
        self.source_factory = source_factory
        self.lineage_cache = LineageCache(broker.client, settings.key_prefix, settings.job_ttl_s)

    # -- requests --------------------------------------------------------------------------------
    def parse(self, body, user: str) -> Request:
        """Check a request body with the kind that serves its profile.

        Raises:
            InvalidParams: malformed body or CIDs.
            InvalidProfile: unknown profile, or a domain it does not allow.
            CidLimitExceeded: more CIDs than ``TRACE_EVENTS_CID_LIMIT``.
        """
        profile = body.get("profile") if isinstance(body, Mapping) else None
        return kinds.for_profile(profile).parse(body, user, self.settings)

    def is_async(self, req: Request) -> bool:
        """Whether the request is a job (its kind decides; by default above ``TRACE_ASYNC_CID_THRESHOLD``)."""
        return kinds.named(req.kind).is_async(req, self.settings)

    def env(self, run: Callable = Env.run) -> Env:
        """What the kinds' submits and routes' handlers use (``run``: calls work done in a request)."""
        return Env(self.settings, self.store, self.dispatcher, self.lineage_cache, self.source_factory, run)

    def submit(self, req: Request) -> str:
        """Admit ``req`` as a job (or return its in-flight twin) and send its first units."""
        return kinds.named(req.kind).submit(req, self.env())

    def spool_hit(self, req: Request) -> dict | None:
        """A stored answer of the same request (an MSD analysis already run with the same masks), or None."""
        return kinds.named(req.kind).spool_hit(req, self.store)

    def estimated_seconds(self, req: Request) -> int:
        """Its units at the pace of the recent completed jobs of its kind (:mod:`tracebus.jobs.pace`),
        each domain's units at that domain's pace (a domain they did not run: at the kind's
        declared work per unit, :attr:`~tracebus.trace.jobkind.JobKind.unit_weights`, scaled to
        theirs), else at :data:`SECONDS_PER_UNIT` over the workers."""
        kind, pace = kinds.named(req.kind), None
        if kind.paced:  # the other kinds' units are not a domain x CID chunk
            pace = job_pace.recent(self.store.redis, self.store.keys, JOB_KIND, kind.actor_name)
        if pace is None:
            return estimate_seconds(req.cid_count, len(req.domains), self.settings.chunk_cids,
                                    self.settings.worker_count)
        chunks = -(-req.cid_count // self.settings.chunk_cids)
        return max(1, round(chunks * sum(pace.unit_seconds(d, kind.unit_weights) for d in req.domains)))

    def run_sync(self, req: Request) -> Iterator[bytes]:
        """The 200 body of a request answered now, produced chunk by chunk and streamed."""
        source = self.source_factory(self.settings)
        try:
            yield from kinds.named(req.kind).run_sync(req, source, self.settings)
        finally:
            source.close()

    # -- reads, scoped to the user ------------------------------------------------------------
    def _owned_kind(self, job_id: str, user: str | None) -> tuple[dict, JobKind]:
        """(the status document, the kind) of a job the caller may read."""
        raw = self.store.status(job_id)
        kind = kinds.of(raw)
        doc = kind.render_status(raw)
        if not owners.may_access(doc.get("user"), user):
            raise JobNotFound(f"no job {job_id}")
        return doc, kind

    def _owned(self, job_id: str, user: str | None) -> dict:
        return self._owned_kind(job_id, user)[0]

    def status(self, job_id: str, user: str | None = None) -> dict:
        return self._owned(job_id, user)

    def detail(self, job_id: str, user: str | None = None) -> dict:
        _, kind = self._owned_kind(job_id, user)
        return kind.render_detail(self.store.detail(job_id))

    def list_jobs(self, user: str | None, status: str | None, offset: int, limit: int) -> dict:
        wanted = listed_states(status) if status is not None else frozenset()
        internal = next(iter(wanted)) if len(wanted) == 1 else None  # else read them all, then filter
        page = self.store.list_jobs(user=user, status=internal, offset=0, limit=1 << 30)
        docs = [kinds.of(d).render_status(d) for d in page["jobs"]]
        if status is not None:
            docs = [d for d in docs if status in (d["status"], d["state"])]
        return {"jobs": docs[offset:offset + limit], "total": len(docs), "offset": offset, "limit": limit}

    def cancel(self, job_id: str, user: str | None = None) -> dict:
        self._owned(job_id, user)
        self.store.cancel(job_id)
        return self._owned(job_id, user)

    def retry(self, job_id: str, user: str | None = None) -> dict:
        self._owned(job_id, user)
        self.dispatcher.send(job_id, self.store.retry(job_id))
        return self._owned(job_id, user)

    def page(self, job_id: str, domain: str, offset: int, limit: int, partial: bool,
             user: str | None = None) -> dict:
        """One page of one domain's rows (see :func:`tracebus.jobs.results.page`); its ``columns``
        are the stored ones, or, before any row is, the kind's columns of the domain."""
        doc, kind = self._owned_kind(job_id, user)
        if domain not in doc["domains"]:
            raise InvalidParams(f"job {job_id} has no domain {domain!r}; it has {', '.join(doc['domains'])}")
        try:
            rows = self.store.page(job_id, domain, offset, limit, partial)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None
        columns = rows["columns"] or list(kind.column_types(self.store.app(job_id), domain)[1])
        return {**rows, "columns": columns, "status": doc["status"], "state": doc["state"],
                "failed_domains": doc["failed_domains"]}

    def stream(self, job_id: str, user: str | None = None, encoding=ndjson.NDJSON,
               follow: bool = False) -> Iterator[bytes]:
        """The whole result as lines (its kind's; by default :mod:`tracebus.trace.ndjson`'s).

        Args:
            encoding: ``ndjson.NDJSON`` or ``ndjson.BINARY``.
            follow(bool): start now, even while the job runs, and send chunks as units commit;
                the stream lasts at most ``TRACE_JOB_TIMEOUT_SECONDS``.
        """
        doc, kind = self._owned_kind(job_id, user)
        if follow:
            return kind.follow_lines(self.store, doc, encoding, self.settings.job_timeout_s)
        try:
            return kind.lines(self.store, doc, encoding)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None

    def full_result(self, job_id: str, domain: str | None = None, offset: int = 0,
                    limit: int | None = None, user: str | None = None, follow: bool = False) -> Iterator[bytes]:
        """The whole result as one JSON document, streamed (its kind's; by default
        :mod:`tracebus.trace.fullresult`'s);
        ``follow``: start now, even while the job runs (at most ``TRACE_JOB_TIMEOUT_SECONDS``)."""
        doc, kind = self._owned_kind(job_id, user)
        if follow:
            return kind.follow_document(self.store, doc, domain, offset, limit, self.settings.job_timeout_s)
        try:
            return kind.document(self.store, doc, domain, offset, limit)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None

    def export(self, job_id: str, domain: str | None, fmt: str, user: str | None = None) -> Iterator[bytes]:
        """One domain (any kind's section) of a completed job as Parquet, Arrow or CSV, typed by
        its kind (:meth:`~tracebus.trace.jobkind.JobKind.column_types`) and written chunk by chunk
        (:mod:`tracebus.jobs.export`);
        ``domain`` may be left out when the job has one.

        Raises:
            InvalidParams: no or an unknown domain. JobNotComplete: the domain is not committed yet.
            JobStateConflict: the domain failed, or the job ended without it. FormatUnavailable:
            Parquet or Arrow without pyarrow.
        """
        doc, kind = self._owned_kind(job_id, user)
        names = doc["domains"]
        if domain is None and len(names) == 1:
            domain = names[0]
        if domain is None:
            raise InvalidParams(f"a domain is required: the job has {len(names)} ({', '.join(names)})")
        if domain not in names:
            raise InvalidParams(f"domain must be one of the job's: {', '.join(names)}; got {domain[:64]!r}")
        if domain in doc["failed_domains"]:
            raise JobStateConflict(f"domain {domain} of job {job_id} failed; retry the job", status=doc["status"])
        export.check_format(fmt)
        try:
            layout = self.store.layouts(job_id, [domain])[domain]
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None
        # Parquet and Arrow read the workers' columnar copies (msgpack where a chunk has none).
        feed = ChunkFeed(self.store, job_id, batch=EXPORT_READ_AHEAD)
        parts = feed.parts(domain, layout.parts, layout.attempts, columnar=fmt != "csv")
        types, order = kind.column_types(self.store.app(job_id), domain)
        return export.write(parts, fmt, types, order, load=feed.value)

    def progress(self, job_id: str, last_id: str = "0-0", block_ms: int | None = None,
                 user: str | None = None):
        self._owned(job_id, user)
        return self.store.read_progress(job_id, last_id=last_id, block_ms=block_ms)


def job_links(job_id: str) -> dict[str, str]:
    """The URLs of an events job's status, result, stream and events."""
    status_url = f"/api/trace/job/{job_id}"
    return {"status_url": status_url, "result_url": f"{status_url}/result",
            "stream_url": f"{status_url}/stream", "events_url": f"{status_url}/events"}


class EventsRequests(NowOrJob):
    """``POST /api/trace/events`` (:func:`tracebus.trace.now_or_job.decide` runs it): the kind that
    serves the profile checks the request and says whether it is answered now (its rows,
    streamed) or a job; a job's request may be answered by a stored answer (an MSD analysis
    already run with the same masks: MSD.md section 5).

    Args:
        service(TraceService): the trace operations.
    """

    what = "synchronous trace"

    def __init__(self, service: TraceService):
        self.service = service

    def check(self, body, user: str) -> Request:
        return self.service.parse(body, user)

    def is_async(self, request: Request) -> bool:
        return self.service.is_async(request)

    def now(self, request: Request, user: str) -> Iterator[bytes]:
        return self.service.run_sync(request)

    def stored(self, request: Request) -> dict | None:
        return self.service.spool_hit(request)

    def submit(self, request: Request, user: str, fresh: bool) -> dict:
        request = replace(request, fresh=True) if fresh else request
        job_id = self.service.submit(request)
        return {"stage": "events", "async": True, "job_id": job_id, **job_links(job_id),
                "cid_count": request.cid_count, "domains": request.domains,
                "estimated_seconds": self.service.estimated_seconds(request)}


def _not_complete(error: JobNotComplete, doc: dict) -> Exception:
    """What to raise when a read finds an incomplete result: JobNotComplete (with the job's
    ``status``) while the job runs; JobStateConflict once it is final (cancelled, or the
    domain failed), since waiting will not help."""
    if doc["state"] in FINAL_STATES:
        return JobStateConflict(
            f"{error.message}: the job is {doc['state']}"
            + (f" (failed domains: {', '.join(doc['failed_domains'])})" if doc["failed_domains"] else "")
            + "; read the committed rows with partial=1, or retry the job", status=doc["status"])
    return JobNotComplete(error.message, status=doc["status"])
