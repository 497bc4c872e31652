"""The registry of the trace application's job kinds: :func:`register`, and what finds a kind.

Each kind's ``kind.py`` registers an instance of its :class:`~tracebus.trace.jobkind.JobKind`
(the protocol) here when :mod:`tracebus.trace.installed` imports it; :func:`register` declares
its unit actor on the trace queue and records its profiles, their domains and params
(:data:`tracebus.trace.domains.PROFILES`, ``PARAM_KEYS``), how the lineage stage answers them
(:data:`LINEAGES`) and those whose page resolves seeds first (:data:`SEED_PROFILES`).

A job finds its kind by the actor that runs its units (:func:`of`, :func:`find`): it is
recorded with the job at submit and carried in every unit message, so it never changes
(renaming an actor would break in-flight messages; a job admitted before a deploy keeps its
kind after it). A request finds it by its profile (:func:`for_profile`). What the API and the
CLI need of every kind at once (their routes, component schemas, ``POST /api/v1/jobs``
requests, statements, the events request's schema) is gathered here over the registered
kinds, so no module outside a kind's folder names one.
"""

from __future__ import annotations

from tracebus.errors import InvalidParams
from tracebus.jobs.actor import unit_actor
from tracebus.trace import domains
from tracebus.trace.jobkind import JobKind
from tracebus.trace.request import EVENTS_REQUEST
from tracebus.trace.routes import Env, Route
from tracebus.trace.runtime import TraceUnit, current
from tracebus.trace.settings import TraceSettings

#: A profile's lineage kept whole for its events stage and answered compact (:attr:`JobKind.profile_lineage`).
COMPACT = "compact"

_KINDS: dict[str, JobKind] = {}
#: The lineage's answer by profile and the profiles seed-resolve serves, as the kinds declare them
#: (:attr:`JobKind.profile_lineage`, :attr:`JobKind.seed_profiles`), filled by :func:`register`.
LINEAGES: dict[str, str] = {}
SEED_PROFILES: list[str] = []
_BY_ACTOR: dict[str, JobKind] = {}
_BY_PROFILE: dict[str, JobKind] = {}
_DEFAULT: list[JobKind] = []


def register(kind: JobKind) -> JobKind:
    """Register ``kind`` and declare its unit actor (on the trace queue); once per name.

    Raises:
        ValueError: another kind has the name, the actor or one of the profiles.
    """
    if _KINDS.get(kind.name) is kind:
        return kind
    clash = [what for what, taken in (("name", kind.name in _KINDS), ("actor", kind.actor_name in _BY_ACTOR),
                                      ("profile", any(p in _BY_PROFILE for p in kind.profiles or ())
                                       or any(p in domains.PROFILES for p in kind.profile_domains)),
                                      ("default profile", kind.profiles is None and bool(_DEFAULT))) if taken]
    if clash or not kind.name or not kind.actor_name:
        raise ValueError(f"job kind {kind.name!r} cannot be registered: {', '.join(clash) or 'no name or actor'}")

    def run(ctx) -> None:
        kind.run_unit(TraceUnit(ctx, current()))

    run.__qualname__ = run.__name__ = f"{type(kind).__name__}.run_unit"
    run.__module__ = type(kind).__module__
    kind.actor = unit_actor(kind.actor_name, queue=unit_queue, **kind.actor_options)(run)
    _KINDS[kind.name] = kind
    _BY_ACTOR[kind.actor_name] = kind
    _BY_PROFILE.update(dict.fromkeys(kind.profiles or (), kind))
    domains.PROFILES.update(kind.profile_domains)
    LINEAGES.update(kind.profile_lineage)
    SEED_PROFILES.extend(kind.seed_profiles)
    domains.PARAM_KEYS.update({p: kind.profile_params.get(p, frozenset()) for p in kind.profile_domains})
    if kind.profiles is None:
        _DEFAULT.append(kind)
    return kind


def unit_queue(settings) -> str:
    """The trace queue: ``TRACE_WORKER_QUEUE``, the one source of its name (every kind's units)."""
    return TraceSettings.adopt(settings).queue


def named(name: str) -> JobKind:
    """The registered kind ``name``.

    Raises:
        KeyError: no such kind.
    """
    return _KINDS[name]


def find(doc: dict) -> JobKind | None:
    """The kind of a job from its job-layer document (``store.status``/``detail``: its ``actor``),
    or None for a job of another application's actor."""
    return _BY_ACTOR.get(doc.get("actor", ""))


def of(doc: dict) -> JobKind:
    """:func:`find`, or the default kind for a job of another application (its sections are
    shown as domains)."""
    return _BY_ACTOR.get(doc.get("actor", "")) or _DEFAULT[0]


def for_profile(profile) -> JobKind:
    """The kind that serves ``profile`` on ``POST /api/trace/events`` (else the default kind,
    whose :meth:`JobKind.parse` refuses an unknown profile)."""
    found = _BY_PROFILE.get(profile) if isinstance(profile, str) else None
    return found or _DEFAULT[0]


def lineage_of(profile: str) -> str:
    """How the lineage stage answers ``profile``: ``compact``, ``forward`` or ``backward``
    (:attr:`JobKind.profile_lineage`; a profile no kind says: ``forward``, as the original's
    ``_resolve_direction``)."""
    return LINEAGES.get(profile, "forward")


def lineage_profiles(answer: str) -> list[str]:
    """The profiles whose lineage the kinds declare answered ``answer`` (:data:`COMPACT`, ``forward``
    or ``backward``), in the order they registered."""
    return [profile for profile, declared in LINEAGES.items() if declared == answer]


def rows_profile(wanted) -> str:
    """A profile answered with the rows of the domains ``wanted`` (the default kind's, whose jobs
    are those rows) that may ask for every one of them: what an example request names.

    Raises:
        LookupError: no such profile.
    """
    for profile, allowed in domains.PROFILES.items():
        if for_profile(profile) is _DEFAULT[0] and set(wanted) <= set(allowed):
            return profile
    raise LookupError(f"no profile of the default kind may ask for {', '.join(wanted)}")


def routes() -> list[Route]:
    """Every registered kind's :meth:`JobKind.routes` (:func:`tracebus.trace.installed.routes`: every kind's).

    Raises:
        ValueError: two routes with one method and path, or one bucket declared with two defaults.
    """
    out, paths, limits = [], {}, {}
    for route in (route for kind in _KINDS.values() for route in kind.routes()):
        at = (route.method, route.path)
        if at in paths:
            raise ValueError(f"route {route.path} is declared by {paths[at]} and {route.name}")
        if route.limit is not None and limits.setdefault(route.bucket, route.limit) != route.limit:
            raise ValueError(f"rate-limit bucket {route.bucket!r} is declared with two defaults "
                             f"({limits[route.bucket]} and {route.limit})")
        paths[at] = route.name
        out.append(route)
    return out


def events_request_schema(limits) -> dict:
    """The JSON Schema of ``POST /api/trace/events``: :data:`~tracebus.trace.request.EVENTS_REQUEST`'s
    and, under each profile of a kind that reads more (:attr:`JobKind.request`), those fields too
    (``if`` the profile ``then`` its schema); ``limits``: the declarations' (``cid_limit``)."""
    schema = EVENTS_REQUEST.schema(limits)
    rules = [{"if": {"required": ["profile"], "properties": {"profile": {"const": profile}}},
              "then": kind.request.schema(limits)}
             for kind in _KINDS.values() if kind.request is not None for profile in kind.profiles or ()]
    if rules:
        schema["allOf"] = rules
    return schema


def schemas(settings: TraceSettings) -> dict[str, dict]:
    """Every registered kind's :meth:`JobKind.schemas`.

    Raises:
        ValueError: two kinds name one schema.
    """
    out: dict[str, dict] = {}
    for kind in _KINDS.values():
        mine = kind.schemas(settings)
        taken = sorted(set(mine) & set(out))
        if taken:
            raise ValueError(f"job kind {kind.name} declares the schema {', '.join(taken)} another kind declares")
        out.update(mine)
    return out


def requests(name: str, env: Env):
    """The :class:`~tracebus.trace.now_or_job.NowOrJob` of ``POST /api/v1/jobs {"kind": name}``.

    Raises:
        InvalidParams: no kind submits ``name``.
    """
    for kind in _KINDS.values():
        if name in kind.submits():
            return kind.requests(name, env)
    raise InvalidParams(f"kind must be one of {', '.join(submittable())}")


def stored_profiles() -> list[str]:
    """The profiles whose kind may answer a request from a stored answer (:meth:`JobKind.spool_hit`)."""
    return [p for kind in _KINDS.values() if type(kind).spool_hit is not JobKind.spool_hit for p in kind.profiles or ()]


def submittable() -> list[str]:
    """Every registered kind's :meth:`JobKind.submits`, sorted."""
    return sorted(name for kind in _KINDS.values() for name in kind.submits())


def statements(d) -> list:
    """Every registered kind's :meth:`JobKind.statements` in dialect ``d``."""
    return [st for kind in _KINDS.values() for st in kind.statements(d)]


def registered() -> dict[str, JobKind]:
    """Every registered kind, by name."""
    return dict(_KINDS)
