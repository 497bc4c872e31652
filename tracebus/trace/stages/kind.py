"""The stage job kind: a large seed-resolve or lineage request run as a one-unit job.

Its requests come through routes of its own (``POST /api/trace/seed-resolve`` and
``/lineage``, declared in :mod:`.http`; :mod:`.answers` and :mod:`.jobs` do the work), so it
serves no events profile; what the kind adds is those routes, its unit (:func:`.units.run_unit`)
and its view in the generic job contract: the stage's query id and its synchronous answer as
the result. Its reads are the seeds' (its own: :mod:`.seeds`, :mod:`.sql`), the query-tool trees
(:mod:`.trees`) and the shared lineage.
"""

from __future__ import annotations

from typing import Iterator

from tracebus.jobs.contract import KindView, kind_of
from tracebus.trace import kinds
from tracebus.trace.jobkind import JobKind
from tracebus.trace.routes import Route
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.stages import http, jobs, sql, units


class StageView(KindView):
    """Seed-resolve and lineage jobs in the generic contract: their query id and the stage's answer.

    Args:
        stages: the :class:`~tracebus.trace.stages.jobs.StageJobs`.
    """

    def __init__(self, stages: jobs.StageJobs):
        self.stages = stages

    def progress(self, doc: dict) -> str:
        return jobs.progress_text(kind_of(doc["job_id"]), doc["status"])

    def ids(self, doc: dict) -> tuple[str | None, str | None]:
        return doc["app"].get("query_id"), None

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        return self.stages.result(kind_of(doc["job_id"]), doc["job_id"], user=user)


class StageKind(JobKind):
    """Seed-resolve (``trace-seed``) and lineage (``trace-lin``) jobs."""

    name = "stages"
    actor_name = jobs.ACTOR_NAME

    def statements(self, d) -> list:
        """The seed-resolve stage's statements (:func:`.sql.statements`)."""
        return sql.statements(d)

    def run_unit(self, unit: TraceUnit) -> None:
        units.run_unit(unit)

    def contract_view(self, service) -> KindView:
        return StageView(jobs.StageJobs(service.settings, service.store.redis))

    def names(self) -> tuple[str, ...]:
        """Its jobs' kinds: ``trace-seed`` and ``trace-lin``."""
        return jobs.SEED_KIND, jobs.LINEAGE_KIND

    def routes(self) -> tuple[Route, ...]:
        """``POST /api/trace/seed-resolve`` and ``/lineage``, and their jobs' status and answer (:mod:`.http`)."""
        return http.routes()

    def schemas(self, settings) -> dict[str, dict]:
        return http.schemas(settings)


STAGES = kinds.register(StageKind())
