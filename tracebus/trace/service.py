"""The trace service: the operations behind the HTTP API and the CLI.

It validates requests (profile, domains, CID list), decides sync or async by
``TRACE_ASYNC_CID_THRESHOLD``, admits jobs (quota, single-flight) and sends their first
units, and answers reads (status, pages, NDJSON stream, progress) scoped to the calling
user: another user's job is "not found". No HTTP here; ``api/`` maps errors to responses.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Iterator, Mapping

import orjson

from tracebus.engine.broker import Broker
from tracebus.errors import InvalidParams
from tracebus.jobs import export
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.feed import ChunkFeed
from tracebus.jobs.errors import JobNotComplete, JobNotFound, JobStateConflict
from tracebus.jobs.store import JobStore
from tracebus.jobs.states import FINAL_STATES, JobState
from tracebus.trace import coltypes, domains, fullresult, jobview, ndjson, owners, query
from tracebus.trace.events import request as jobrequest
from tracebus.trace.lineage_cache import LineageCache
from tracebus.trace.msd.job import plan as msdplan
from tracebus.trace.msd.job import spoolhit
from tracebus.trace.msd.job import views as msdviews
from tracebus.trace.settings import TraceSettings
from tracebus.trace.sources import EventSource, open_source
from tracebus.trace.states import V1_STATUS
from tracebus.trace.tasks import ACTOR_NAME

log = logging.getLogger(__name__)

#: Rough seconds of one worker per unit, for ``estimated_seconds``. Timed with ``up`` at
#: scale 1.0 on two cores and two workers (issue 26): 232 units (two domains) in 6 s and 580
#: (five) in 16 s, 0.05-0.1 s each; 0.5 had said 58 s and 145 s.
SECONDS_PER_UNIT = 0.06
#: Chunks an export reads per round trip (a columnar copy of 5,000 history rows is ~90 KB).
EXPORT_READ_AHEAD = 4


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
    def parse(self, body, user: str) -> jobrequest.Request:
        """Validate a request body.

        Raises:
            InvalidParams: malformed body or CIDs.
            InvalidProfile: unknown profile, or a domain it does not allow.
            CidLimitExceeded: more CIDs than ``TRACE_EVENTS_CID_LIMIT``.
        """
        if not isinstance(body, Mapping):
            raise InvalidParams(jobrequest.EVENTS_REQUEST.not_object)
        body = {**body, "params": domains.known_params(body.get("profile"), body.get("params")), "user": user}
        limits = {"cid_limit": self.settings.events_cid_limit}
        req = jobrequest.normalize(body, limits)
        wanted = domains.validate(req.profile, req.domains)
        msd = msdplan.parse(body, wanted, req.user, limits) if req.profile == msdplan.PROFILE else None
        return replace(req, domains=wanted, msd=msd)

    def is_async(self, req: jobrequest.Request) -> bool:
        """Above ``TRACE_ASYNC_CID_THRESHOLD`` CIDs; MSD requests always (their detail and export
        read the job's stored data, and the original's snapshot has no inline MSD compute)."""
        return req.msd is not None or req.cid_count > self.settings.async_cid_threshold

    def submit(self, req: jobrequest.Request) -> str:
        """Admit ``req`` as a job (or return its in-flight twin) and send its first units."""
        if req.msd is not None:
            job_id = msdplan.submit(self.store, self.dispatcher, req.msd, self.settings, self.lineage_cache,
                                    lambda: self.source_factory(self.settings))
            log.info("MSD job %s submitted: %d seeds, %s, user %s", job_id, len(req.msd.seeds),
                     req.msd.params.direction, req.user, extra={"job_id": job_id, "user": req.user})
            return job_id
        spec = jobrequest.to_spec(req, self.settings.chunk_cids, self.settings.queue, ACTOR_NAME)
        job_id = self.store.create(spec)
        log.info("job %s submitted: %s, %d cids, domains %s, user %s", job_id, req.profile, req.cid_count,
                 ",".join(req.domains), req.user, extra={"job_id": job_id, "user": req.user})
        self.dispatcher.start(job_id)
        return job_id

    def spool_hit(self, req: jobrequest.Request) -> dict | None:
        """The stored analysis of an MSD request already run with the same masks, or None
        (see :mod:`tracebus.trace.msd.job.spoolhit`)."""
        return None if req.msd is None else spoolhit.answer(self.store, req.msd)

    def estimated_seconds(self, req: jobrequest.Request) -> int:
        return estimate_seconds(req.cid_count, len(req.domains), self.settings.chunk_cids,
                                self.settings.worker_count)

    def run_sync(self, req: jobrequest.Request) -> Iterator[bytes]:
        """The original 200 body, produced chunk by chunk and streamed (memory: one batch).

        ``{"stage": "events", "results": {domain: {"data": [...], "count": n}}, "aggregation": null}``
        """
        source = self.source_factory(self.settings)
        try:
            yield b'{"stage":"events","results":{'
            for i, domain in enumerate(req.domains):
                yield (b"," if i else b"") + orjson.dumps(domain) + b':{"data":['
                count = 0
                for start in range(0, req.cid_count, self.settings.chunk_cids):
                    cids = req.container_ids[start:start + self.settings.chunk_cids]
                    for columns, rows in source.fetch(domain, cids, self.settings.fetchmany_rows):
                        body = b",".join(orjson.dumps(dict(zip(columns, row))) for row in rows)
                        if body:
                            yield (b"," if count else b"") + body
                            count += len(rows)
                yield b'],"count":' + str(count).encode() + b"}"
            yield b'},"aggregation":null}'
        finally:
            source.close()

    # -- reads, scoped to the user ------------------------------------------------------------
    def _owned(self, job_id: str, user: str | None) -> dict:
        doc = jobview.render_status(self.store.status(job_id))
        if not owners.may_access(doc.get("user"), user):
            raise JobNotFound(f"no job {job_id}")
        return doc

    def status(self, job_id: str, user: str | None = None) -> dict:
        return self._owned(job_id, user)

    def detail(self, job_id: str, user: str | None = None) -> dict:
        self._owned(job_id, user)
        return jobview.render_detail(self.store.detail(job_id))

    def list_jobs(self, user: str | None, status: str | None, offset: int, limit: int) -> dict:
        # "completed" also lists partial jobs, which the trace contract shows as completed.
        internal = None if status in (None, V1_STATUS[JobState.COMPLETED]) else status
        page = self.store.list_jobs(user=user, status=internal, offset=0, limit=1 << 30)
        docs = [jobview.render_status(d) for d in page["jobs"]]
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
        """One page of one domain's rows (see :func:`tracebus.jobs.results.page`)."""
        doc = self._owned(job_id, user)
        if domain not in doc["domains"]:
            raise InvalidParams(f"job {job_id} has no domain {domain!r}; it has {', '.join(doc['domains'])}")
        try:
            rows = self.store.page(job_id, domain, offset, limit, partial)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None
        return {**rows, "status": doc["status"], "state": doc["state"],
                "failed_domains": doc["failed_domains"]}

    def stream(self, job_id: str, user: str | None = None, encoding=ndjson.NDJSON,
               follow: bool = False) -> Iterator[bytes]:
        """The whole result as lines (see :mod:`tracebus.trace.ndjson`).

        Args:
            encoding: ``ndjson.NDJSON`` or ``ndjson.BINARY``.
            follow(bool): start now, even while the job runs, and send chunks as units commit;
                the stream lasts at most ``TRACE_JOB_TIMEOUT_SECONDS``.
        """
        doc = self._owned(job_id, user)
        if follow:
            return ndjson.follow(self.store, doc, encoding, max_s=self.settings.job_timeout_s)
        try:
            if msdviews.is_msd(doc):
                return msdviews.lines(self.store, doc, encoding.line)
            return ndjson.stream(self.store, job_id, doc["profile"], doc["domains"],
                                 doc.get("failed_domains") or (), encoding)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None

    def full_result(self, job_id: str, domain: str | None = None, offset: int = 0,
                    limit: int | None = None, user: str | None = None, follow: bool = False) -> Iterator[bytes]:
        """The whole result as one JSON document, streamed (see :mod:`tracebus.trace.fullresult`);
        ``follow``: start now, even while the job runs (at most ``TRACE_JOB_TIMEOUT_SECONDS``)."""
        doc = self._owned(job_id, user)
        if follow:
            return fullresult.follow(self.store, doc, domain, offset, limit, max_s=self.settings.job_timeout_s)
        try:
            return fullresult.stream(self.store, doc, domain, offset, limit)
        except JobNotComplete as e:
            raise _not_complete(e, doc) from None

    def export(self, job_id: str, domain: str | None, fmt: str, user: str | None = None) -> Iterator[bytes]:
        """One domain (any kind's section) of a completed job as Parquet, Arrow or CSV, typed by
        :mod:`tracebus.trace.coltypes` and written chunk by chunk (:mod:`tracebus.jobs.export`);
        ``domain`` may be left out when the job has one.

        Raises:
            InvalidParams: no or an unknown domain. JobNotComplete: the domain is not committed yet.
            JobStateConflict: the domain failed, or the job ended without it. FormatUnavailable:
            Parquet or Arrow without pyarrow.
        """
        doc = self._owned(job_id, user)
        names = doc["domains"]
        if domain is None and len(names) == 1:
            domain = names[0]
        if domain not in names:
            raise InvalidParams(f"domain must be one of the job's: {', '.join(names)}"
                                + (f"; got {domain[:64]!r}" if domain else ""))
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
        app = self.store.status(job_id)["app"]
        if "query" in app:  # a declared query kind types its own columns
            declared = query.kind_of(app["query"]).statement(app["params"])[1].columns
            return export.write(parts, fmt, dict(declared), [c for c, _ in declared], load=feed.value)
        return export.write(parts, fmt, coltypes.types_of(domain), domains.COLUMNS.get(domain, ()), load=feed.value)

    def progress(self, job_id: str, last_id: str = "0-0", block_ms: int | None = None,
                 user: str | None = None):
        self._owned(job_id, user)
        return self.store.read_progress(job_id, last_id=last_id, block_ms=block_ms)


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
