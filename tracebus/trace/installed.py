"""The job kinds of the trace application: importing this module registers every one.

A new kind is a folder with a ``kind.py`` that registers it (:func:`tracebus.trace.kinds.register`)
and one line here; the service, the writers, the generic job contract and the worker's module
(:mod:`tracebus.trace.tasks`) then serve it as they serve these, and the API the routes it
declares (:func:`routes`).
"""

from __future__ import annotations

from tracebus.trace import kinds
from tracebus.trace.routes import Env, Route

from tracebus.trace.events.kind import EVENTS  # noqa: F401  (the default profile's kind)
from tracebus.trace.msd.kind import MSD  # noqa: F401
from tracebus.trace.query.kind import QUERY  # noqa: F401
from tracebus.trace.stages.kind import STAGES  # noqa: F401


def routes() -> list[Route]:
    """The routes of their own every installed kind declares (the API serves, limits and documents these)."""
    return kinds.routes()


def events_request_schema(limits) -> dict:
    """``POST /api/trace/events``'s body schema, with what each installed kind reads under its profiles
    (:func:`tracebus.trace.kinds.events_request_schema`)."""
    return kinds.events_request_schema(limits)


def schemas(settings) -> dict[str, dict]:
    """The OpenAPI component schemas every installed kind's routes refer to."""
    return kinds.schemas(settings)


def requests(name: str, env: Env):
    """The requests ``POST /api/v1/jobs {"kind": name}`` makes jobs of (:func:`tracebus.trace.kinds.requests`)."""
    return kinds.requests(name, env)


def stored_profiles() -> list[str]:
    """The profiles a stored answer may answer on ``POST /api/trace/events`` (an analysis already run)."""
    return kinds.stored_profiles()


def submittable() -> list[str]:
    """The kinds ``POST /api/v1/jobs`` takes, by the name its body gives (:meth:`~tracebus.trace.jobkind.JobKind.submits`)."""
    return kinds.submittable()


def statements(d) -> list:
    """The statements of their own every installed kind sends in dialect ``d`` (``tracebus sql``)."""
    return kinds.statements(d)


def rows_profile(wanted) -> str:
    """A profile whose requests are answered with the rows of the domains ``wanted`` (:func:`tracebus.trace.kinds.rows_profile`)."""
    return kinds.rows_profile(wanted)
