"""The protocol every job kind of the trace application implements: :class:`JobKind`.

A kind is one folder (:mod:`.events`, :mod:`.msd`, :mod:`.stages`, :mod:`.query`) whose
``kind.py`` subclasses :class:`JobKind` and registers an instance with
:func:`tracebus.trace.kinds.register` (the registry); :mod:`tracebus.trace.installed` imports
every kind module. A new kind is a new folder and one line there. The service
(:mod:`.service`), the result writers (:mod:`.ndjson`, :mod:`.fullresult`, :mod:`.jobview`) and
the generic job contract (:mod:`.generic_jobs`) find the kind of what they hold and ask it;
none of them asks which kind it is.

What a kind answers:

* a request of ``POST /api/trace/events`` whose ``profile`` it serves (:attr:`JobKind.profiles`):
  :meth:`~JobKind.parse`, :meth:`~JobKind.is_async`, :meth:`~JobKind.spool_hit`,
  :meth:`~JobKind.submit` (plan its units and admit the job), :meth:`~JobKind.run_sync`;
* what makes two of its requests the same, so that one is answered from the other's completed
  result (:meth:`~JobKind.fingerprint`, built with :meth:`~JobKind.result_key`: the kind, the
  normalised request, the source it reads), and whether that result may answer another caller
  (:attr:`JobKind.caller_dependent`; :mod:`tracebus.jobs.reuse`);
* a unit of its jobs: :meth:`~JobKind.run_unit`, run by the unit actor :attr:`JobKind.actor_name`
  that :func:`~tracebus.trace.kinds.register` declares;
* a job's status (:meth:`~JobKind.render_status`) and result lines: the NDJSON / binary stream
  (:meth:`~JobKind.lines`, :meth:`~JobKind.follow_lines`), the full result document
  (:meth:`~JobKind.document`, :meth:`~JobKind.follow_document`), the typed export's columns
  (:meth:`~JobKind.column_types`), and its view in the generic contract (:meth:`~JobKind.contract_view`);
* its HTTP side (:mod:`tracebus.trace.routes`): the routes of its own it serves
  (:meth:`~JobKind.routes`, each a :class:`~tracebus.trace.routes.Route`: its path, what serves
  it, a plain-Python handler built over an :class:`~tracebus.trace.routes.Env`, its rate-limit
  bucket and default, its OpenAPI operation as data) and the component schemas those refer to
  (:meth:`~JobKind.schemas`): the API adds them, limits them and documents them by looping over
  :func:`tracebus.trace.installed.routes`, naming no kind;
  and its requests of ``POST /api/v1/jobs`` (:meth:`~JobKind.submits`, :meth:`~JobKind.requests`);
* what names it to the outside (:meth:`~JobKind.names`: its profiles, the kinds of its jobs),
  which no module outside its folder spells, and what its profiles are: their domains and params
  (:attr:`~JobKind.profile_domains`, ``profile_params``), how the lineage stage answers them and
  whether their page resolves seeds first (:attr:`~JobKind.profile_lineage`, ``seed_profiles``).

A job finds its kind by the actor that runs its units (:mod:`tracebus.trace.kinds` says how).

The defaults are those of a kind whose sections are event domains and whose units write rows
(the events kind's); a kind overrides what differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Iterator

from tracebus.errors import InvalidParams
from tracebus.jobs.contract import KindView
from tracebus.jobs.spec import fingerprint_of
from tracebus.trace import coltypes, dashview, domains, fullresult, jobview, ndjson
from tracebus.trace.routes import Env, Route
from tracebus.trace.runtime import TraceUnit
from tracebus.trace.settings import TraceSettings
from tracebus.trace.sources import source_identity

#: Retries of one unit after a transient error (exponential backoff from 2 s to 60 s).
UNIT_MAX_RETRIES = 3
#: The unit actor's engine options, the same for every kind unless it says otherwise.
ACTOR_OPTIONS = {"max_retries": UNIT_MAX_RETRIES, "min_backoff_ms": 2_000, "max_backoff_ms": 60_000,
                 "time_limit_ms": 600_000}


class JobKind:
    """The protocol of a job kind; see the module docstring. Subclasses set :attr:`name` and
    :attr:`actor_name` and override what differs from these defaults."""

    #: The kind's name in the registry.
    name: str = ""
    #: The unit actor of its jobs (recorded with each job; never renamed).
    actor_name: str = ""
    #: Engine options of that actor.
    actor_options: dict = ACTOR_OPTIONS
    #: The engine actor :func:`~tracebus.trace.kinds.register` declared (None until then).
    actor = None
    #: Profiles of ``POST /api/trace/events`` it serves: a tuple, or None for every profile no
    #: other kind names (one kind only: the events kind); ``()`` for a kind with routes of its own.
    profiles: tuple[str, ...] | None = ()
    #: The profiles it declares: the domains each may request (:data:`tracebus.trace.domains.PROFILES`)
    #: and the ``params`` keys its events request reads (:data:`~tracebus.trace.domains.PARAM_KEYS`).
    profile_domains: dict[str, tuple[str, ...]] = {}
    profile_params: dict[str, frozenset[str]] = {}
    #: How ``POST /api/trace/lineage`` answers each of its profiles (the stage kind reads it,
    #: :func:`~tracebus.trace.kinds.lineage_of`): :data:`~tracebus.trace.kinds.COMPACT` (the lineage kept whole for the events stage under its
    #: query id, its ids and counts answered; its direction from ``params.direction``), or
    #: ``forward`` / ``backward`` (the original's tree that way, the direction by profile).
    profile_lineage: dict[str, str] = {}
    #: Its profiles whose page resolves its seeds first (``POST /api/trace/seed-resolve``).
    seed_profiles: tuple[str, ...] = ()
    #: Whether its units are one domain x one chunk of CIDs, so that a request's ``estimated_seconds``
    #: is its units at the pace of the kind's recent jobs (:mod:`tracebus.jobs.pace`).
    paced: bool = False
    #: Whether the kind's answer depends on who asks, not on the request alone. False (the trace,
    #: MSD, stage and query kinds: every caller reads the same DWH): a completed result answers an
    #: identical request of any user, as a job of their own. True: only the same user's.
    caller_dependent: bool = False
    #: The relative work of one unit of each section, for ``estimated_seconds`` of a section the
    #: recent jobs did not run (:meth:`tracebus.jobs.pace.Pace.unit_seconds`); empty: all alike.
    unit_weights: Mapping[str, float] = MappingProxyType({})
    #: What a ``POST /api/trace/events`` request of its profiles reads beyond every events
    #: request's fields (:data:`~tracebus.trace.request.EVENTS_REQUEST`), declared
    #: (a :class:`~tracebus.jobs.shapes.Shape`: its :meth:`parse` checks them with it, and the
    #: OpenAPI ``TraceRequest`` states them under its profiles,
    #: :func:`~tracebus.trace.kinds.events_request_schema`); None: nothing more.
    request = None

    # -- a request -------------------------------------------------------------------------------
    def parse(self, body, user: str, settings: TraceSettings):
        """The checked request (a :class:`~tracebus.trace.request.Request`).

        Raises:
            InvalidParams, InvalidProfile, CidLimitExceeded: the request is refused.
        """
        raise InvalidParams(f"job kind {self.name} takes no events request")

    def is_async(self, req, settings: TraceSettings) -> bool:
        """Whether ``req`` is a job (202) rather than answered now (200)."""
        return req.cid_count > settings.async_cid_threshold

    def spool_hit(self, req, store) -> dict | None:
        """A stored answer of the same request, answered at once instead of a new job; None."""
        return None

    def fingerprint(self, req, settings: TraceSettings) -> str:
        """What makes two requests the same for reuse (:attr:`tracebus.jobs.spec.JobSpec.result_key`):
        :meth:`result_key` of the request's normalised parts; "" never reuses."""
        return ""

    def result_key(self, settings: TraceSettings, user: str, *request) -> str:
        """sha256 hex of the kind, the source it reads (:func:`~tracebus.trace.sources.source_identity`),
        the user when :attr:`caller_dependent`, and ``request`` (its normalised parts, in the
        order that shapes the result); "" when reuse is off (``TRACE_RESULT_REUSE_MAX_AGE_S=0``)."""
        if settings.reuse_max_age_s <= 0:
            return ""
        return fingerprint_of("result", self.name, source_identity(settings),
                              user if self.caller_dependent else None, *request)

    def submit(self, req, env: Env) -> str:
        """Admit ``req`` as a job (or return its in-flight twin) and send its first units."""
        raise NotImplementedError(f"job kind {self.name} does not submit events requests")

    def run_sync(self, req, source, settings: TraceSettings) -> Iterator[bytes]:
        """The 200 body of a request answered now, streamed."""
        raise NotImplementedError(f"job kind {self.name} answers no request synchronously")

    def routes(self) -> tuple[Route, ...]:
        """The routes of its own it serves (none: its requests come through ``POST /api/trace/events``)."""
        return ()

    def names(self) -> tuple[str, ...]:
        """What names the kind to the outside: the profiles it serves and the kinds (id prefixes) of
        its jobs. No module outside the kind's folder spells one (tests/test_layers.py checks it)."""
        return tuple(dict.fromkeys([*(self.profiles or ()), *self.profile_domains]))

    def schemas(self, settings: TraceSettings) -> dict[str, dict]:
        """The OpenAPI component schemas its routes' documents refer to (:func:`~tracebus.trace.routes.ref`), by name."""
        return {}

    def requests(self, name: str, env: Env):
        """The :class:`~tracebus.trace.now_or_job.NowOrJob` of ``POST /api/v1/jobs {"kind": name}``
        (``name`` one of :meth:`submits`)."""
        raise KeyError(name)

    def statements(self, d) -> list:
        """The statements of its own it sends to the DWH, in dialect ``d``, beside the sources' reads
        (:func:`tracebus.trace.statements.every_statement`): :class:`~tracebus.trace.sources.catalog.Statement` s."""
        return []

    def submits(self) -> tuple[str, ...]:
        """The names ``POST /api/v1/jobs {"kind"}`` takes for jobs of this kind (none)."""
        return ()

    # -- a unit ----------------------------------------------------------------------------------
    def run_unit(self, unit: TraceUnit) -> None:
        """Run one unit of a job of this kind (in a worker)."""
        raise NotImplementedError(f"job kind {self.name} has no unit")

    # -- a job's status and result ---------------------------------------------------------------
    def render_status(self, raw: dict) -> dict:
        """The trace status document of a job from the job layer's (``store.status``/``detail``)."""
        return jobview.render_status(raw)

    def render_detail(self, raw: dict) -> dict:
        """The detail document (``GET /api/v1/jobs/{id}``) from the job layer's ``detail``."""
        return jobview.render_detail(raw, self.render_status(raw))

    def lines(self, store, doc: dict, encoding) -> Iterator[bytes]:
        """The finished job's result as NDJSON or binary lines (:func:`tracebus.trace.ndjson.stream`).

        Raises:
            JobNotComplete: a section that did not fail is not fully committed.
        """
        return ndjson.stream(store, doc["job_id"], doc["profile"], doc["domains"],
                             doc.get("failed_domains") or (), encoding)

    def follow_lines(self, store, doc: dict, encoding, max_s: float | None) -> Iterator[bytes]:
        """The result lines sent as units commit (:func:`tracebus.trace.ndjson.follow`)."""
        return ndjson.follow(store, doc, encoding, max_s=max_s, render=self.render_status)

    def document(self, store, doc: dict, only: str | None, offset: int, limit: int | None) -> Iterator[bytes]:
        """The finished job's full result document (:func:`tracebus.trace.fullresult.stream`)."""
        return fullresult.stream(store, doc, only, offset, limit)

    def follow_document(self, store, doc: dict, only: str | None, offset: int, limit: int | None,
                        max_s: float | None) -> Iterator[bytes]:
        """The full result document written while the job runs (:func:`tracebus.trace.fullresult.follow`)."""
        return fullresult.follow(store, doc, only, offset, limit, max_s=max_s, render=self.render_status)

    def column_types(self, app: dict, section: str) -> tuple[dict[str, str], tuple[str, ...]]:
        """``(column -> export type, the columns in order)`` of one section, for the typed export."""
        return coltypes.types_of(section), tuple(domains.COLUMNS.get(section, ()))

    def contract_view(self, service) -> KindView:
        """The kind's view in the dashboard's generic job contract (``/api/job/{id}``), over
        ``service`` (the :class:`~tracebus.trace.service.TraceService`)."""
        return TraceView(self, service)


class TraceView(KindView):
    """A job in the generic contract as the trace poller sees it: the kind's state and progress
    words, ``query_id`` and ``trace_query_id`` of its status, and its full result document.

    Args:
        kind(JobKind): the job's kind.
        service: the :class:`~tracebus.trace.service.TraceService` (reads scoped to the caller).
    """

    def __init__(self, kind: JobKind, service):
        self.kind, self.service = kind, service

    def state(self, doc: dict) -> str:
        """The state the kind shows (an MSD job whose detection or reduce failed has failed)."""
        return self.kind.render_status(doc)["state"]

    def progress(self, doc: dict) -> str:
        return dashview.progress_text(self.state(doc), doc["progress"])

    def ids(self, doc: dict) -> tuple[str | None, str | None]:
        """The job id (the key of its result) and, when its kind has one, its ``trace_query_id``."""
        query_id, _ = super().ids(doc)
        return query_id, (self.kind.render_status(doc).get("trace_query_id") if query_id else None)

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        """What ``GET /api/trace/job/{id}/result`` answers without ``domain``."""
        return self.service.full_result(doc["job_id"], user=user)
