"""A trace-events request (``POST /api/trace/events``), shared by the kinds that serve one (the
events kind, :mod:`.events`, and MSD's, :mod:`.msd`): its declaration, normalisation, the checks
every events request passes, its single-flight fingerprint, and the kind of the jobs it makes.

Pure functions. Container ids are stripped and deduplicated with their order kept
(DOMAIN.md section 2); domains are deduplicated likewise. The fingerprint identifies
"the same request by the same user" for single-flight: profile, the sorted domain set,
the sorted CID set, params and the user. :func:`check` is what every events request passes
(any profile, MSD's too) and gives the :class:`Request` its kind builds on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Limits, Text
from tracebus.jobs.list_fields import Strings
from tracebus.jobs.shapes import Obj, Shape
from tracebus.jobs.spec import fingerprint_of
from tracebus.trace import domains as _domains
from tracebus.trace.domains import DOMAINS, PROFILES
from tracebus.trace.errors import CidLimitExceeded

#: Kind of the jobs an events request makes, whichever kind of this application runs them (an
#: MSD job too), and the prefix of their ids (``trace-evt-<24 hex>``).
JOB_KIND = "trace-evt"


@dataclass(frozen=True, slots=True)
class Request:
    """A normalised events request.

    Attributes:
        profile(str): the profile (validated against domains elsewhere, in domains.py).
        container_ids(list[str]): deduplicated CIDs, order kept.
        domains(list[str]): deduplicated domains, order kept.
        params(dict): JSON-serialisable request parameters.
        user(str): who asked (quota, single-flight, listing).
        kind(str): the job kind that serves it (:func:`tracebus.trace.kinds.for_profile`).
        extra: that kind's own checked form (MSD's :class:`~tracebus.trace.msd.job.plan.MsdRequest`), or None.
        fresh(bool): run the query again rather than answer from a stored result (``Cache-Control:
            no-cache``).
    """

    profile: str
    container_ids: list[str]
    domains: list[str]
    params: dict = field(default_factory=dict)
    user: str = "anonymous"
    kind: str = "events"
    extra: Any = None
    fresh: bool = False

    @property
    def cid_count(self) -> int:
        return len(self.container_ids)


#: Largest ``params`` accepted, as compact JSON (every profile's fit in a few hundred bytes).
MAX_PARAMS_BYTES = 64 * 1024
#: Longest accepted container id (Oracle CHAR(16); generous for names pasted by users).
MAX_CID_LENGTH = 64

#: The ``query_id`` (``lin-...``) of a lineage stage's answer, handed over: a string or null in
#: every events request; what it does is said by the kinds whose profiles read it (their
#: :attr:`~tracebus.trace.jobkind.JobKind.request` declares it again, described).
LINEAGE_QUERY_ID = Text("lineage_query_id", nullable=True, nonempty=False,
                        invalid="lineage_query_id must be a string (the query_id of a lineage answer)",
                        description="the `query_id` (`lin-...`) of a lineage stage's answer, handed over "
                                    "instead of computing the lineage again, under the profiles that read it "
                                    "(below); the others ignore it")

#: ``POST /api/trace/events``: its fields, limits and messages (the OpenAPI ``TraceRequest``
#: is derived from it). The CID cap is the limit ``cid_limit`` (``TRACE_EVENTS_CID_LIMIT``).
EVENTS_REQUEST = Shape((
    LINEAGE_QUERY_ID,
    Text("profile", required=True, invalid="profile must be a non-empty string", enum=PROFILES),
    Obj("params", max_json_bytes=MAX_PARAMS_BYTES),
    Strings("container_ids", missing="container_ids is required", not_string="{name} must contain only strings",
            empty="{name} must not be empty", max_length=MAX_CID_LENGTH,
            too_long="container id longer than {max} characters: {value!r}",
            max_items="cid_limit", over_limit=CidLimitExceeded, description="stripped and de-duplicated, order kept"),
    Strings("domains", missing="domains is required", not_string="{name} must contain only strings",
            empty="{name} must not be empty", items={"enum": list(DOMAINS)},
            description="must be allowed by the profile"),
))


def normalize(body: Any, limits: Limits = {}) -> Request:
    """Check and normalise a request body (its ``user`` key, if any, names who asks).

    Raises:
        InvalidParams: a field is missing, has the wrong type or is too long (:data:`EVENTS_REQUEST`).
        CidLimitExceeded: more CIDs than ``limits["cid_limit"]``.
    """
    checked = EVENTS_REQUEST.check(body, limits)
    user = body.get("user")
    user = user if isinstance(user, str) and user else "anonymous"
    return Request(checked["profile"], checked["container_ids"], checked["domains"], checked["params"], user)


def check(body, user: str, cid_limit: int) -> tuple[Mapping, Request]:
    """``(the body with only the params its profile reads and its user, the checked request)``
    of an events request: its fields (:data:`EVENTS_REQUEST`), then its domains against its profile.

    Raises:
        InvalidParams: malformed body or CIDs.
        InvalidProfile: unknown profile, or a domain it does not allow.
        CidLimitExceeded: more CIDs than ``cid_limit`` (``TRACE_EVENTS_CID_LIMIT``).
    """
    if not isinstance(body, Mapping):
        raise InvalidParams(EVENTS_REQUEST.not_object)
    body = {**body, "params": _domains.known_params(body.get("profile"), body.get("params")), "user": user}
    req = normalize(body, {"cid_limit": cid_limit})
    return body, replace(req, domains=_domains.validate(req.profile, req.domains))


def fingerprint(req: Request) -> str:
    """sha256 hex of (profile, sorted domains, sorted CID set, params, user)."""
    return fingerprint_of(req.profile, sorted(req.domains), sorted(req.container_ids), req.params, req.user)

