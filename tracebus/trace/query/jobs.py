"""Requests of the declared query kinds: answered now (200) or admitted as a job (202).

:class:`QueryRequests` (one kind's, run by :func:`tracebus.trace.now_or_job.decide`) checks the parameters (:meth:`~tracebus.trace.query.QueryKind.check`),
answers a short span in the API process with the same code the units run
(:func:`~tracebus.trace.query.answers.run_sync`), and admits a long one as a job of the kind on the
trace queue (quota and single-flight as every job), whose result is read back through the
generic contract (``/api/job/{id}?prefix=<kind>``, :class:`QueryView`).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from tracebus.jobs.contract import KindView, check_completed
from tracebus.jobs.dispatch import Dispatcher
from tracebus.jobs.store import JobStore
from tracebus.trace import kinds, query
from tracebus.trace.now_or_job import NowOrJob
from tracebus.trace.query import answers
from tracebus.trace.settings import TraceSettings
from tracebus.trace.states import QUERY_STATE
from tracebus.trace.sources import EventSource, open_source, read_once

log = logging.getLogger(__name__)

#: The registered job kind of every declared query kind (:mod:`.kind`).
QUERY_KIND = "query"


def links(job_id: str, kind: str) -> dict[str, str]:
    """The original's URLs of a query job (the generic contract)."""
    return {"status_url": f"/api/job/{job_id}?prefix={kind}", "result_url": f"/api/job/{job_id}/result?prefix={kind}"}


class QueryJobs:
    """Runs or admits requests of the declared kinds.

    Args:
        settings(TraceSettings): the queue, fetch size, TTLs, quota, cost limits.
        store(JobStore): the jobs.
        dispatcher(Dispatcher): sends a new job's first units.
        source_factory: opens the source for a synchronous answer.
        run: calls ``fn(*args)`` for a synchronous answer (the API runs it off its event loop).
    """

    def __init__(self, settings: TraceSettings, store: JobStore, dispatcher: Dispatcher,
                 source_factory: Callable[[TraceSettings], EventSource] = open_source,
                 run: Callable = lambda fn, *args: fn(*args)):
        self.settings, self.store, self.dispatcher, self.source_factory = settings, store, dispatcher, source_factory
        self.run = run
        self.limits = query.Limits(settings.query_max_units, settings.query_max_binds,
                                   settings.query_max_params_bytes)

    def answer_now(self, kind: query.QueryKind, params: dict) -> dict:
        """The synchronous answer: the units run here, in order (no Redis: ``run`` may put it
        on a thread of its own)."""
        return read_once(self.source_factory, self.settings,
                         lambda source: answers.run_sync(source, kind, params, self.settings.fetchmany_rows))

    def requests(self, kind_name: str) -> "QueryRequests":
        """The requests of the declared kind ``kind_name`` (:class:`QueryRequests`).

        Raises:
            InvalidParams: no such kind.
        """
        return QueryRequests(self, query.kind_of(kind_name))


class QueryRequests(NowOrJob):
    """Requests of one declared kind (:func:`tracebus.trace.now_or_job.decide` runs them):
    answered now for a span under the kind's ``async_days`` costing at most
    ``TRACE_QUERY_SYNC_MAX_UNITS`` units; else a job of its own (202 ``{async, job_id, kind,
    status_url, result_url}``), answered from the stored result of an identical request when one
    is alive (unless ``fresh``).

    The check raises InvalidParams (parameters the kind refuses) and CostLimitExceeded (a request
    over the kind's limits, :func:`~tracebus.trace.query.bound`); the submit QuotaExceeded.
    """

    def __init__(self, jobs: QueryJobs, kind: query.QueryKind):
        self.jobs, self.kind = jobs, kind
        self.what = f"answer of {kind.kind}"

    def check(self, body, user: str) -> tuple[dict, int]:
        """``(the checked parameters, their units)``."""
        params = self.kind.check(body)
        return params, query.bound(self.kind, params, self.jobs.limits)

    def is_async(self, request: tuple[dict, int]) -> bool:
        params, units = request
        return self.kind.is_async(params) or units > self.jobs.settings.query_sync_max_units

    def now(self, request: tuple[dict, int], user: str) -> dict:
        return self.jobs.run(self.jobs.answer_now, self.kind, request[0])

    def submit(self, request: tuple[dict, int], user: str, fresh: bool) -> dict:
        jobs, kind, params = self.jobs, self.kind, request[0]
        key = kinds.named(QUERY_KIND).result_key(jobs.settings, user, kind.kind, params)
        job_id = jobs.store.create(kind.spec(params, user, jobs.settings.queue, key, fresh))
        log.info("query job %s submitted: %s %s, user %s", job_id, kind.kind, params[kind.selector], user,
                 extra={"job_id": job_id, "user": user})
        jobs.dispatcher.start(job_id)
        return {"async": True, "job_id": job_id, "kind": kind.kind, **links(job_id, kind.kind)}


class QueryView(KindView):
    """The generic contract's view of a query job: its result is :func:`tracebus.trace.query.answers.answer_stream`
    (the document of :func:`~tracebus.trace.query.answers.answer`, merged from the units' sorted rows as
    it is written); a job with a failed unit has failed (its answer would miss rows)."""

    def state(self, doc: dict) -> str:
        return str(QUERY_STATE[doc["status"]])

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        check_completed(doc, self.state(doc))
        app = doc["app"]
        kind = query.kind_of(app["query"])
        section, _ = kind.statement(app["params"])
        layout = store.layouts(doc["job_id"], [section])[section]
        return answers.answer_stream(kind, app["params"], store.unit_row_streams(doc["job_id"], section, layout))
