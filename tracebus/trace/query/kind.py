"""The query job kind: every declared query kind's jobs (:mod:`tracebus.trace.query`).

Their requests come through routes of their own (``POST /api/query-tool/...``,
``POST /api/v1/jobs``, :mod:`.jobs`), so it serves no events profile. What the kind adds is
its unit (one window and ID list of the declared statement), the declared column types of
its typed export, its view in the generic job contract (:class:`~.jobs.QueryView`), and each
declared kind's own route (:meth:`QueryJobKind.routes`, from its ``http``), which the API serves,
rate-limits and documents without naming the kind.
"""

from __future__ import annotations

import functools

from tracebus.engine.worker import heartbeat
from tracebus.jobs.contract import ACCEPTED_SCHEMA, KindView
from tracebus.trace import kinds, query
from tracebus.trace.jobkind import JobKind
from tracebus.trace.query import answers
from tracebus.trace.query.jobs import QueryJobs, QueryRequests, QueryView, links
from tracebus.trace.routes import Doc, Env, Route
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.sources.catalog import EXAMPLE_WINDOW, Statement, origin_of

#: Example binds of ``tracebus sql``'s listing.
_IDS = {"p0": "EQ-0001", "p1": "EQ-0002"}
_NARROW = {"n0": "GA25010101", "n1": "GA25010102"}


class QueryJobKind(JobKind):
    """Jobs of the declared query kinds."""

    name = "query"
    actor_name = query.ACTOR_NAME

    def run_unit(self, unit: TraceUnit) -> None:
        """A declared query kind's unit: its window and ID list, its rows stored sorted
        (:func:`~tracebus.trace.query.answers.sort_unit`)."""
        app = unit.app
        kind = query.kind_of(app["query"])
        [item] = unit.input  # one [window start, window end, ID list index] per unit
        statement = kind.statement(app["params"])[1]
        unit.set_column_types(dict(statement.columns))
        # Sorted here, in the worker that is recycled on memory, so the API only merges units.
        rows = []
        for batch in answers.unit_rows(unit.source, kind, app["params"], item, unit.settings.fetchmany_rows):
            rows += batch
            heartbeat()
        answers.sort_unit(statement, rows)
        step = unit.settings.fetchmany_rows
        for at in range(0, len(rows), step):
            unit.write(statement.names, rows[at:at + step])

    def routes(self) -> tuple[Route, ...]:
        """Each declared query kind's own route (:attr:`~tracebus.trace.query.QueryKind.http`):
        answered now or a job (:class:`~.jobs.QueryRequests`), always in the original's envelope."""
        return tuple(Route(path=k.http.path, serves="now-or-job", handler=functools.partial(_requests, k.kind),
                                 doc=functools.partial(_doc, k), name=k.kind, bucket=k.http.bucket,
                                 limit=k.http.limit, enveloped="always")
                     for k in query.declared().values() if k.http)

    def requests(self, name: str, env: Env) -> QueryRequests:
        """The requests of the declared kind ``name`` (``POST /api/v1/jobs`` makes them jobs)."""
        return _requests(name, env)

    def statements(self, d) -> list[Statement]:
        """One statement per declared kind and selector (and its narrowed form), with example binds."""
        out = []
        for kind in query.declared().values():
            for selector, st in kind.statements.items():
                binds = {"w0": EXAMPLE_WINDOW[0], "w1": EXAMPLE_WINDOW[1], **(_IDS if st.ids else {})}
                n_ids = len(_IDS) if st.ids else 0
                out.append(Statement(f"query.{kind.kind}.{selector}", st.text(d, n_ids), binds, origin_of(st.sql)))
                if st.narrow:  # the statement narrowed by its optional list, as a request giving it sends
                    out.append(Statement(f"query.{kind.kind}.{selector}.{st.narrow}", st.text(d, n_ids, len(_NARROW)),
                                         {**binds, **_NARROW}, origin_of(st.sql)))
        return out

    def names(self) -> tuple[str, ...]:
        """Every declared query kind (its jobs' kind and the generic contract's prefix)."""
        return tuple(query.declared())

    def submits(self) -> tuple[str, ...]:
        """Every declared query kind, by its name."""
        return tuple(query.declared())

    def column_types(self, app: dict, section: str) -> tuple[dict[str, str], tuple[str, ...]]:
        """The declared statement's columns and types."""
        declared = query.kind_of(app["query"]).statement(app["params"])[1].columns
        return dict(declared), tuple(c for c, _ in declared)

    def contract_view(self, service) -> KindView:
        return QueryView()


def _requests(name: str, env: Env) -> QueryRequests:
    return QueryJobs(env.settings, env.store, env.dispatcher, env.source_factory, run=env.run).requests(name)


def _doc(k: query.QueryKind, settings) -> Doc:
    """The OpenAPI operation of ``k``'s route."""
    return Doc(
        summary=f"{k.http.title}: under {k.async_days} days answered now, else a job (always enveloped)",
        responses={"200": (k.answer_schema(), "the rows"),
                   "202": (ACCEPTED_SCHEMA, f"a job of kind {k.kind}: poll status_url ({links('{id}', k.kind)['status_url']}); "
                                     "answered from an identical request's result when one is stored or in flight "
                                     "(reused_from in its status; Cache-Control: no-cache runs it again)")},
        errors=("400", "413", "429", "503", "507"), body=k.schema())


QUERY = kinds.register(QueryJobKind())
