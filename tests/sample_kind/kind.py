"""The sample kind: its routes are :mod:`.http`'s; its unit does nothing."""

from __future__ import annotations

from tracebus.trace import kinds
from tracebus.trace.jobkind import JobKind
from tracebus.trace.routes import Route
from tests.sample_kind import http


class SampleKind(JobKind):
    name = "sample"
    actor_name = http.ACTOR_NAME

    def names(self) -> tuple[str, ...]:
        return (http.JOB_KIND,)

    def run_unit(self, unit) -> None:
        pass

    def routes(self) -> tuple[Route, ...]:
        return http.routes()

    def schemas(self, settings) -> dict[str, dict]:
        return http.schemas(settings)


SAMPLE = kinds.register(SampleKind())
