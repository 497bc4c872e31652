"""The HTTP side a job kind declares, as data: its routes, their OpenAPI operations, their answers.

A kind lists its routes in :meth:`~tracebus.trace.jobkind.JobKind.routes`, each a :class:`Route`:
its path, what serves it (:data:`SERVES`: one resource of the API per way of serving), a
plain-Python handler built over an :class:`Env`, its rate-limit bucket and default, and its
OpenAPI operation as a :class:`Doc` (component schemas referred to with :func:`ref`). A
``lookup`` may answer a :class:`Reply` (envelope meta), a ``download`` a :class:`Download`.
The API serves, limits and documents every registered kind's routes from these alone
(:func:`tracebus.trace.installed.routes`), naming no kind; nothing here knows Falcon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from tracebus.trace.settings import TraceSettings

#: What serves a route (:attr:`Route.serves`): the API has one resource for each, and the kind's
#: handler (:attr:`Route.handler`, plain Python) does the work.
#:
#: * ``now-or-job``: ``POST``, a JSON body; the handler is a :class:`~tracebus.trace.now_or_job.NowOrJob`
#:   (200 with the answer made now, or 202 with the job: :func:`~tracebus.trace.now_or_job.decide`);
#: * ``job-status``, ``job-result``: ``GET`` of a path with ``{job_id}``; the handler is
#:   ``(job_id, user) -> document`` (status) or ``-> Iterator[bytes]`` (the result's JSON, streamed);
#: * ``lookup``: ``GET`` answered now from the query string; the handler is ``(values, user) ->
#:   document`` or a :class:`Reply` (a document and envelope meta), ``values(name)`` the values
#:   the query string gives ``name``, in order (``[]``: absent);
#: * ``download``: ``GET`` of a file, streamed; the handler is ``(values, user) ->`` :class:`Download`.
SERVES = {"now-or-job": "POST", "job-status": "GET", "job-result": "GET", "lookup": "GET", "download": "GET"}


@dataclass(frozen=True)
class Reply:
    """A ``lookup`` answer with meta fields of the original's envelope (``{success, data, meta}``)."""

    body: Any
    meta: dict | None = None


@dataclass(frozen=True)
class Download:
    """A ``download``'s answer: an attachment ``filename`` of ``content_type``, its text
    ``lines`` streamed (UTF-8)."""

    filename: str
    content_type: str
    lines: Iterator[str]


def ref(name: str) -> dict:
    """The OpenAPI reference of the component schema ``name`` (a kind's :meth:`~tracebus.trace.jobkind.JobKind.schemas`)."""
    return {"$ref": f"#/components/schemas/{name}"}


@dataclass(frozen=True)
class Doc:
    """A route's OpenAPI operation as data; the API's document builds the operation from it
    (adding the caller's header, the security, the server's own errors and the envelope).

    Attributes:
        summary(str): the operation's summary.
        responses(dict): status -> ``(JSON schema, description)``, or a whole response object
            (another content type).
        errors(tuple[str, ...]): the error statuses it may answer (the API's error documents).
        params(tuple[dict, ...]): its query parameters (OpenAPI parameter objects).
        job_id(str): the description of the path's ``{job_id}`` (a ``job-*`` route's).
        body(dict | None): the JSON Schema of its required JSON body (a ``now-or-job`` route's).
        description(str): the operation's description ("" none).
    """

    summary: str
    responses: dict
    errors: tuple[str, ...] = ()
    params: tuple[dict, ...] = ()
    job_id: str = ""
    body: dict | None = None
    description: str = ""


@dataclass(frozen=True)
class Route:
    """A route a kind declares in its own folder; the API serves, rate-limits and documents it
    from this alone, with the resource :attr:`serves` names.

    Attributes:
        path(str): the URL (``{job_id}`` in the path of a ``job-*`` route).
        serves(str): what serves it (:data:`SERVES`: also its method).
        handler(Callable[[Env], Any]): builds the plain-Python handler from the API's :class:`Env`.
        doc(Callable[[TraceSettings], Doc]): its OpenAPI operation, with the settings' limits.
        name(str): whose route it is (a kind's, or a declared query kind's name), for clashes.
        bucket(str): its rate-limit bucket (``TRACEBUS_RATE_LIMITS`` names it); "" none.
        limit(tuple[int, int] | None): the bucket's default, when the route declares the bucket:
            at most this many requests per that many seconds; None: a bucket of the API's own or
            another route's.
        enveloped(str): ``always`` (in the original's envelope whatever the settings say) or
            ``dashboard`` (the dashboard's route: unless ``TRACEBUS_API_DASHBOARD_ENVELOPE=0``).
    """

    path: str
    serves: str
    handler: Callable[[Env], Any]
    doc: Callable[[TraceSettings], Doc]
    name: str = ""
    bucket: str = ""
    limit: tuple[int, int] | None = None
    enveloped: str = "dashboard"

    def __post_init__(self):
        if self.serves not in SERVES:
            raise ValueError(f"route {self.path}: serves must be one of {', '.join(SERVES)}, not {self.serves!r}")

    @property
    def method(self) -> str:
        return SERVES[self.serves]


def _direct(fn: Callable, *args) -> Any:
    return fn(*args)


@dataclass(frozen=True)
class Env:
    """What a kind's :meth:`~tracebus.trace.jobkind.JobKind.submit` and its routes' handlers may use: the service's
    settings, store, dispatcher, lineage cache and source factory, and ``run``, which calls
    ``fn(*args)`` for work done in a request (the API runs it off its event loop)."""

    settings: TraceSettings
    store: Any
    dispatcher: Any
    lineage_cache: Any
    source_factory: Callable[[TraceSettings], Any]
    run: Callable = _direct
