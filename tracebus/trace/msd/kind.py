"""The MSD job kind: ``POST /api/trace/events`` with profile ``mid_section_defect``.

Always a job (its detail and export read the job's stored data, and the original's snapshot
has no inline MSD compute), unless the same analysis with the same masks is stored (a spool
hit, :mod:`.job.spoolhit`). The request is checked as every events request
(:func:`tracebus.trace.request.check`), then as MSD's (:func:`.job.plan.parse`); the
job is planned and admitted by :func:`.job.plan.submit`, its units run by :mod:`.job.units`,
and its status and result are :mod:`.job.views`' (the aggregation, not rows). What it reads of
the DWH besides the event domains and the lineage is its own (:mod:`.reads`, :mod:`.sql`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Iterator

from tracebus.trace import coltypes, kinds, request
from tracebus.trace.jobkind import JobKind
from tracebus.trace.msd import http, sql
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msd.keys import MsdKeys
from tracebus.trace.msd.job import plan, spoolhit, units, views
from tracebus.trace.msd.params import MSD_PARAMS
from tracebus.trace.msd.job.detailstore import DetailStore
from tracebus.trace.request import Request
from tracebus.trace.routes import Env, Route
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.settings import TraceSettings

log = logging.getLogger(__name__)


class MsdKind(JobKind):
    """MSD events jobs (see the module docstring)."""

    name = "msd"
    actor_name = plan.ACTOR_NAME
    profiles = (plan.PROFILE,)
    request = plan.MSD_REQUEST
    #: Its page resolves its seeds first, and its lineage is kept whole for the events stage.
    seed_profiles = (plan.PROFILE,)
    profile_lineage = {plan.PROFILE: "compact"}
    profile_domains = {plan.PROFILE: ("upstream_history", "materials", "downstream_rejects")}
    #: The MSD page's filters: the keys :data:`~.params.MSD_PARAMS` declares.
    profile_params = {plan.PROFILE: frozenset(f.name for f in MSD_PARAMS.fields)}

    def parse(self, body, user: str, settings: TraceSettings) -> Request:
        body, req = request.check(body, user, settings.events_cid_limit)
        limits = {"cid_limit": settings.events_cid_limit}
        return replace(req, kind=self.name, extra=plan.parse(body, req.domains, req.user, limits))

    def is_async(self, req: Request, settings: TraceSettings) -> bool:
        return True

    def spool_hit(self, req: Request, store) -> dict | None:
        return spoolhit.answer(store, req.extra)

    def fingerprint(self, req: Request, settings: TraceSettings) -> str:
        """The domains, the seeds, the params as sent and the lineage the request names (its
        ``lineage_query_id``, its own lineage object): all known before the lineage is read."""
        msd = req.extra
        return self.result_key(settings, req.user, msd.domains, msd.seeds, msd.raw_params, msd.lineage_query_id,
                               msd.lineage)

    def submit(self, req: Request, env: Env) -> str:
        """Answered from a stored result before the lineage is read (no source read at all);
        else planned and admitted (:func:`.job.plan.submit`)."""
        msd, store = req.extra, env.store
        key = self.fingerprint(req, env.settings)
        reused = store.reuse(request.JOB_KIND, req.user, key, self.actor_name) if key and not req.fresh else None
        if reused is not None:
            job_id = reused[0]
        else:
            job_id = plan.submit(store, env.dispatcher, msd, env.settings, env.lineage_cache,
                                 lambda: env.source_factory(env.settings), key, req.fresh)
        holder = store.data_id(job_id)
        if holder != job_id:  # its detail reads the run's rows, orderings and records: kept as long
            DetailStore(store).keep(holder, msd.domains)
            plan.index_job(store.redis, MsdKeys(env.settings.key_prefix).index(msd.trace_query_id),
                           req.user, job_id, env.settings.job_ttl_s)
            log.info("MSD job %s answered from a stored result: %d seeds, %s, user %s", job_id, len(msd.seeds),
                     msd.params.direction, req.user, extra={"job_id": job_id, "user": req.user})
            return job_id
        log.info("MSD job %s submitted: %d seeds, %s, user %s", job_id, len(msd.seeds), msd.params.direction,
                 req.user, extra={"job_id": job_id, "user": req.user})
        return job_id

    def statements(self, d) -> list:
        """The detection, backward-rows and lookup statements (:func:`.sql.statements`)."""
        return sql.statements(d)

    def run_unit(self, unit: TraceUnit) -> None:
        units.run_unit(unit)

    def routes(self) -> tuple[Route, ...]:
        """The MSD page's lookups and its job's detail and export (:mod:`.http`)."""
        return http.routes()

    def schemas(self, settings: TraceSettings) -> dict[str, dict]:
        return http.schemas(settings)

    def column_types(self, app: dict, section: str) -> tuple[dict[str, str], tuple[str, ...]]:
        """An event domain's, or the ``detection`` rows' (the one section with stored rows)."""
        if section == plan.DETECTION:
            return coltypes.types_of_columns(DETECTION_COLUMNS), tuple(DETECTION_COLUMNS)
        return super().column_types(app, section)

    def render_status(self, raw: dict) -> dict:
        return views.status(raw)

    def lines(self, store, doc: dict, encoding) -> Iterator[bytes]:
        return views.lines(store, doc, encoding.line)

    def follow_lines(self, store, doc: dict, encoding, max_s: float | None) -> Iterator[bytes]:
        return views.follow_lines(store, doc, encoding, max_s)

    def document(self, store, doc: dict, only: str | None, offset: int, limit: int | None) -> Iterator[bytes]:
        return views.document(store, doc, only)

    def follow_document(self, store, doc: dict, only: str | None, offset: int, limit: int | None,
                        max_s: float | None) -> Iterator[bytes]:
        return views.follow_document(store, doc, only, max_s)


MSD = kinds.register(MsdKind())
