"""A trace-job request: normalisation, the checks of an events request, single-flight
fingerprint, and the job spec it becomes.

Pure functions. Container ids are stripped and deduplicated with their order kept
(DOMAIN.md section 2); domains are deduplicated likewise. The fingerprint identifies
"the same request by the same user" for single-flight: profile, the sorted domain set,
the sorted CID set, params and the user. :func:`check` is what every events request passes
(any profile, MSD's too) and gives the :class:`TraceRequest` its kind builds on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from typing import Any

from tracebus.errors import InvalidParams
from tracebus.jobs.spec import JobSpec, fingerprint_of
from tracebus.trace import domains as _domains
from tracebus.trace.errors import CidLimitExceeded

#: Kind of trace-events jobs, and the prefix of their ids (``trace-evt-<24 hex>``).
JOB_KIND = "trace-evt"


@dataclass(frozen=True, slots=True)
class Request:
    """A normalised job request.

    Attributes:
        profile(str): the profile (validated against domains elsewhere, in domains.py).
        container_ids(list[str]): deduplicated CIDs, order kept.
        domains(list[str]): deduplicated domains, order kept.
        params(dict): JSON-serialisable request parameters.
        user(str): who asked (quota, single-flight, listing).
    """

    profile: str
    container_ids: list[str]
    domains: list[str]
    params: dict = field(default_factory=dict)
    user: str = "anonymous"


#: Largest ``params`` accepted, as compact JSON (every profile's fit in a few hundred bytes).
MAX_PARAMS_BYTES = 64 * 1024
#: Longest accepted container id (Oracle CHAR(16); generous for names pasted by users).
MAX_CID_LENGTH = 64


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """A checked events request: profile, deduplicated CIDs and domains, params, user, the
    name of the job kind that serves it, and that kind's own checked form (``extra``; MSD's
    :class:`~tracebus.trace.msd.job.plan.MsdRequest`)."""

    profile: str
    container_ids: list[str]
    domains: list[str]
    params: dict
    user: str
    kind: str = "events"
    extra: Any = None

    @property
    def cid_count(self) -> int:
        return len(self.container_ids)


def check(body, user: str, cid_limit: int) -> tuple[Mapping, TraceRequest]:
    """``(body with only the params its profile reads, the checked request)`` of an events request.

    Raises:
        InvalidParams: malformed body or CIDs.
        InvalidProfile: unknown profile, or a domain it does not allow.
        CidLimitExceeded: more CIDs than ``cid_limit`` (``TRACE_EVENTS_CID_LIMIT``).
    """
    if not isinstance(body, Mapping):
        raise InvalidParams("request body must be a JSON object")
    if "container_ids" not in body:
        raise InvalidParams("container_ids is required")
    if "domains" not in body:
        raise InvalidParams("domains is required")
    if body.get("lineage_query_id") is not None and not isinstance(body["lineage_query_id"], str):
        raise InvalidParams("lineage_query_id must be a string (the query_id of a lineage answer)")
    body = {**body, "params": _domains.known_params(body.get("profile"), body.get("params"))}
    req = normalize({**body, "user": user})
    wanted = _domains.validate(req.profile, req.domains)
    if max(map(len, req.container_ids)) > MAX_CID_LENGTH:
        too_long = next(c for c in req.container_ids if len(c) > MAX_CID_LENGTH)
        raise InvalidParams(f"container id longer than {MAX_CID_LENGTH} characters: {too_long[:80]!r}")
    if len(req.container_ids) > cid_limit:
        raise CidLimitExceeded(f"container_ids count ({len(req.container_ids)}) exceeds limit ({cid_limit})",
                               cid_count=len(req.container_ids), limit=cid_limit)
    return body, TraceRequest(req.profile, req.container_ids, wanted, req.params, req.user)


def _get(spec, name: str, default=None):
    if isinstance(spec, Mapping):
        return spec.get(name, default)
    return getattr(spec, name, default)


def _dedup_strings(values, name: str) -> list[str]:
    if not isinstance(values, (list, tuple)):
        raise InvalidParams(f"{name} must be a list of strings")
    # map/filter keep the per-element work in C: 114K CIDs are normalised in a few ms.
    if not all(issubclass(t, str) for t in set(map(type, values))):
        raise InvalidParams(f"{name} must contain only strings")
    out = list(dict.fromkeys(filter(None, map(str.strip, values))))
    if not out:
        raise InvalidParams(f"{name} must not be empty")
    return out


def normalize(spec) -> Request:
    """Validate and normalise a request given as a mapping or an object.

    Raises:
        InvalidParams: a field is missing or has the wrong type.
    """
    profile, params, user = _get(spec, "profile"), _get(spec, "params"), _get(spec, "user")
    params = {} if params is None else params  # absent or null; false, 0 or "" are not objects
    if not isinstance(profile, str) or not profile:
        raise InvalidParams("profile must be a non-empty string")
    if not isinstance(params, Mapping):
        raise InvalidParams("params must be an object")
    try:
        size = len(json.dumps(params, separators=(",", ":")))
    except (TypeError, ValueError):
        raise InvalidParams("params must be JSON-serialisable") from None
    if size > MAX_PARAMS_BYTES:  # they are stored with the job for its whole TTL
        raise InvalidParams(f"params is {size} bytes of JSON; the limit is {MAX_PARAMS_BYTES}")
    user = user if isinstance(user, str) and user else "anonymous"
    return Request(profile, _dedup_strings(_get(spec, "container_ids"), "container_ids"),
                   _dedup_strings(_get(spec, "domains"), "domains"), dict(params), user)


def fingerprint(req: Request) -> str:
    """sha256 hex of (profile, sorted domains, sorted CID set, params, user)."""
    return fingerprint_of(req.profile, sorted(req.domains), sorted(req.container_ids), req.params, req.user)


def to_spec(req: Request, chunk_cids: int, queue: str, actor_name: str) -> JobSpec:
    """The job of ``req``: one section per domain, the CIDs as items, ``chunk_cids`` per unit."""
    return JobSpec(kind=JOB_KIND, user=req.user, sections=tuple(req.domains), items=req.container_ids,
                   chunk_items=chunk_cids, queue=queue, actor_name=actor_name,
                   fingerprint=fingerprint(req), app={"profile": req.profile, "params": req.params})
