"""Admitting an MSD events job: parse the request, resolve lineage, build the staged JobSpec.

Pure apart from :func:`submit`, which reads the lineage cache (or the source) and stores
the lineage artifacts the units read: per CID chunk, the seeds of the chunk with their
ancestors and root names (backward), or the forward children map (forward).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Mapping

import msgpack

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Limits
from tracebus.jobs.list_fields import Strings
from tracebus.jobs.shapes import Obj, Shape
from tracebus.jobs.spec import JobSpec, fingerprint_of
from tracebus.trace import domains, owners
from tracebus.trace.errors import CidLimitExceeded
from tracebus.trace.request import JOB_KIND, LINEAGE_QUERY_ID, MAX_CID_LENGTH
from tracebus.trace.msd.keys import MsdKeys
from tracebus.trace.msd import MsdParams, trace_query_id
from tracebus.trace.msd.params import EVENTS_DATES, MSD_PARAMS
from tracebus.trace.msd.sql import BACKWARD_COLUMNS
from tracebus.trace.sources.lineage import LineageReads

PROFILE = "mid_section_defect"
ACTOR_NAME = "msd_unit"
DETECTION, CONTEXT, DETAIL, FINALIZE = "detection", "context", "detail", "finalize"
INTERNAL_SECTIONS = (DETECTION, CONTEXT, DETAIL, FINALIZE)


def pack(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def packer():
    """:func:`pack` for one caller packing many values: one reused Packer (``packb`` builds a
    new one per call); not to be shared between threads."""
    return msgpack.Packer(use_bin_type=True).pack


def unpack(raw: bytes | None, default=None):
    return default if raw is None else msgpack.unpackb(raw, raw=False, strict_map_key=False)


@dataclass(frozen=True, slots=True)
class MsdRequest:
    """A validated MSD events request.

    Attributes:
        seeds: seed CIDs (``seed_container_ids`` else ``container_ids``), order kept.
        domains: requested event domains.
        params: the parsed parameters; ``raw_params`` as sent.
        container_mode: ``params.mode == "container"`` (detection over the whole fetch set).
        lineage: the request's lineage object, or None; ``lineage_query_id`` likewise.
        user: who asks.
    """

    seeds: list[str]
    domains: list[str]
    params: MsdParams
    raw_params: dict
    container_mode: bool
    lineage: dict | None
    lineage_query_id: str | None
    user: str

    @property
    def trace_query_id(self) -> str:
        p = self.params
        return trace_query_id(PROFILE, self.seeds, start_date=p.start_date, end_date=p.end_date,
                              station=p.station_raw, direction=p.direction)


#: The seeds of an MSD events request, ``seed_container_ids`` (else its ``container_ids``),
#: checked as the events request checks its CIDs (:data:`~tracebus.trace.request.EVENTS_REQUEST`).
SEEDS = Strings("seed_container_ids", not_string="{name} must contain only strings",
                empty="seed_container_ids / container_ids must not be empty", max_length=MAX_CID_LENGTH,
                too_long="container id longer than {max} characters: {value!r}",
                max_items="cid_limit", over_limit=CidLimitExceeded,
                description="the seeds (empty or absent: container_ids), checked and capped as container_ids")
#: What an MSD events request reads beyond every events request's fields
#: (:data:`~tracebus.trace.request.EVENTS_REQUEST`): its seeds, the lineage handed over and its
#: ``params``; the kind's :attr:`~tracebus.trace.jobkind.JobKind.request`, so the OpenAPI
#: ``TraceRequest`` says it under the profile.
MSD_REQUEST = Shape((
    SEEDS,
    replace(LINEAGE_QUERY_ID, description="the `query_id` (`lin-...`) of a lineage stage's answer, handed over "
                                          "instead of computing the lineage again; unknown or expired: computed"),
    Obj("lineage", invalid="lineage must be an object",
        description="a lineage stage's answer handed over (`ancestors`, `seed_roots`, `names` backward; "
                    "`children_map` forward), instead of computing it again"),
    Obj("params", fields=MSD_PARAMS, description=MSD_PARAMS.description),
))


def parse(body: Mapping[str, Any], wanted_domains: list[str], user: str, limits: Limits = {}) -> MsdRequest:
    """Validate the MSD parts of an events body (profile and domains are already checked), as
    :data:`MSD_REQUEST` declares them.

    Args:
        limits: ``cid_limit``, the cap on the seeds (``TRACE_EVENTS_CID_LIMIT``).

    Raises:
        InvalidParams: bad direction, station, dates, seeds or lineage.
        CidLimitExceeded: more seeds than ``limits["cid_limit"]``.
    """
    raw = body.get("params") or {}
    params = MsdParams.from_params(raw)
    domains.normalize_stations(params.station_raw or ",".join(params.stations))  # unknown → 400
    if params.direction == "backward":  # its units read only these; another would fail every retry
        unread = [d for d in wanted_domains if d not in BACKWARD_COLUMNS]
        if unread:
            raise InvalidParams(f"the backward MSD analysis reads {', '.join(BACKWARD_COLUMNS)}, not "
                                f"{', '.join(unread)}")
    container_mode = MSD_PARAMS.value(raw, "mode") == "container"
    if not container_mode and (params.start_date or params.end_date):
        EVENTS_DATES.check_span(params.start_date, params.end_date)
    seeds = SEEDS.check(body.get("seed_container_ids") or body.get("container_ids") or [], limits)
    lineage = MSD_REQUEST.value(body, "lineage") or None
    lqid = MSD_REQUEST.value(body, "lineage_query_id")
    return MsdRequest(seeds, list(wanted_domains), params, dict(raw), container_mode, lineage, lqid or None, user)


def resolve_lineage(req: MsdRequest, cache, source_factory) -> dict:
    """The lineage of the request: its own object, else the cached stage answer, else the source.

    Returns:
        ``{"ancestors", "seed_roots", "names"}`` (backward) or ``{"children_map"}`` (forward).
    """
    found = req.lineage
    if found is None and req.lineage_query_id and cache is not None:
        found = cache.get(req.lineage_query_id)
        if found is not None and found.get("profile") is not None:  # a query-tool tree, not an MSD lineage
            found = None
    if found is None or not isinstance(found.get("ancestors" if req.params.direction == "backward"
                                                 else "children_map"), Mapping):
        source = source_factory()
        try:
            if req.params.direction == "backward":
                found = LineageReads(source).lineage_backward(req.seeds).to_dict()
            else:
                found = LineageReads(source).lineage_forward(req.seeds).to_dict()
        finally:
            source.close()
    if req.params.direction == "backward":
        return {"ancestors": dict(found.get("ancestors") or {}),
                "seed_roots": dict(found.get("seed_roots") or {}), "names": dict(found.get("names") or {})}
    return {"children_map": dict(found.get("children_map") or {})}


def fetch_set(req: MsdRequest, lineage: dict) -> list[str]:
    """Seeds first, then the other lineage CIDs (ancestors, or forward descendants BFS)."""
    out = dict.fromkeys(req.seeds)
    if req.params.direction == "backward":
        for seed in req.seeds:
            out.update(dict.fromkeys(str(a) for a in lineage["ancestors"].get(seed) or ()))
    else:
        children = lineage["children_map"]
        frontier = list(req.seeds)
        while frontier:
            nxt = [str(c) for p in frontier for c in children.get(p) or () if str(c) not in out]
            out.update(dict.fromkeys(nxt))
            frontier = list(dict.fromkeys(nxt))
    return list(out)


def job_items(req: MsdRequest, lineage: dict) -> list[str]:
    """The job's items: forward, the fetch set; backward, the seeds ordered by wafer root (lots
    of one root share most ancestors, so a chunk of them reads each shared node once), then in
    container mode the rest of the fetch set (detection runs over all of it)."""
    if req.params.direction == "forward":
        return fetch_set(req, lineage)
    roots = lineage["seed_roots"]
    seeds = sorted(req.seeds, key=lambda s: (str(roots.get(s) or ""), s))
    if not req.container_mode:
        return seeds
    return seeds + fetch_set(req, lineage)[len(req.seeds):]


def to_spec(req: MsdRequest, items: list[str], chunk_cids: int, queue: str, lineage_digest: str,
            result_key: str = "", fresh: bool = False) -> JobSpec:
    """The staged job of the request (see the package docstring for the stages).

    ``lineage_digest`` (:func:`lineage_digest`) is part of the single-flight fingerprint: the
    request alone does not say which lineage its units read (the request's own, the lineage
    stage's, or the source's at the time), and a twin's submit stores its artifacts again."""
    if req.params.direction == "backward":
        sections, stages = (*req.domains, DETAIL, FINALIZE), (len(req.domains), 1, 1)
    else:
        sections, stages = (DETECTION, CONTEXT, *req.domains, DETAIL, FINALIZE), (1, 1, len(req.domains), 1, 1)
    app = {"profile": PROFILE, "params": req.raw_params,
           "msd": {"direction": req.params.direction, "trace_query_id": req.trace_query_id,
                   "seed_count": len(req.seeds), "domains": req.domains,
                   "container_mode": req.container_mode}}
    fp = fingerprint_of(PROFILE, sorted(req.domains), sorted(req.seeds), req.raw_params, req.user, lineage_digest)
    return JobSpec(kind=JOB_KIND, user=req.user, sections=sections, items=items, chunk_items=chunk_cids,
                   queue=queue, actor_name=ACTOR_NAME, fingerprint=fp, app=app, stages=stages,
                   result_key=result_key, fresh=fresh)


def lineage_artifacts(req: MsdRequest, lineage: dict, items: list[str], chunk_cids: int) -> dict[str, bytes]:
    """The artifacts the units read: ``seeds`` (all seeds, request order) and, forward,
    ``fwd`` (the children map); backward, per chunk of seeds in ``items``, ``lin:<chunk>``
    ``{"anc": {seed: [ancestors]}, "root": {seed: root name}, "wr": {seed: WAFER_ROOT}}`` for
    its detail unit and ``nodes:<chunk>`` ``[nodes, n_own]`` for its events units: the chunk's
    seeds and their ancestors, the first ``n_own`` of them the ones no earlier chunk has,
    whose rows and records that chunk's units count and store."""
    out = {"seeds": pack(req.seeds)}
    if req.params.direction == "forward":
        out["fwd"] = pack(lineage["children_map"])
        return out
    anc, roots, names = lineage["ancestors"], lineage["seed_roots"], lineage["names"]
    with_lineage = {s for s, v in anc.items() if isinstance(v, (list, tuple))}
    seeds, seen = items[:len(req.seeds)], set()
    for start in range(0, len(seeds), chunk_cids):
        chunk = seeds[start:start + chunk_cids]
        mine = {s: [str(a) for a in anc[s]] for s in chunk if s in with_lineage}
        nodes = dict.fromkeys(chunk)
        for ancestors in mine.values():
            nodes.update(dict.fromkeys(ancestors))
        own = [n for n in nodes if n not in seen]
        seen.update(own)
        mine_own = set(own)
        c = start // chunk_cids
        out[f"lin:{c}"] = pack({
            "anc": mine, "root": {s: roots[s] for s in chunk if roots.get(s)},
            "wr": {s: _wafer_root(s, ancestors, with_lineage, names) for s, ancestors in mine.items()}})
        out[f"nodes:{c}"] = pack([own + [n for n in nodes if n not in mine_own], len(own)])
    return out


def lineage_digest(items: list[str], artifacts: dict[str, bytes]) -> str:
    """sha256 hex of what a job's units read besides its request: its items and the lineage
    artifacts (:func:`lineage_artifacts`)."""
    digest = hashlib.sha256(pack(items))
    for name in sorted(artifacts):
        digest.update(pack([name, artifacts[name]]))
    return digest.hexdigest()


def _wafer_root(seed: str, ancestors: list[str], seeds: set, names: Mapping) -> str:
    """The detail's WAFER_ROOT (MSD.md §3): names of the seed's ancestors that are not seeds
    themselves, sorted and comma-joined; computed here because only here are all seeds known."""
    return ", ".join(sorted({str(names.get(a) or "").strip() or a for a in ancestors
                             if a != seed and a not in seeds}))


def submit(store, dispatcher, req: MsdRequest, settings, cache, source_factory, result_key: str = "",
           fresh: bool = False) -> str:
    """Admit ``req`` as an MSD job (or find its in-flight twin: the same request with the same
    lineage, whose artifacts it stores again byte for byte), store its lineage artifacts and
    the trace_query_id index, and send its first units. ``result_key`` and ``fresh``: as the
    :class:`~tracebus.jobs.spec.JobSpec`'s; a job answered from a stored result is returned as
    it is (the caller keeps its kind's keys and indexes it).

    Raises:
        QuotaExceeded: the user has too many jobs in flight.
        SourceError: the lineage had to be recomputed and the source failed.
    """
    lineage = resolve_lineage(req, cache, source_factory)
    items = job_items(req, lineage)
    artifacts = lineage_artifacts(req, lineage, items, settings.chunk_cids)
    spec = to_spec(req, items, settings.chunk_cids, settings.queue, lineage_digest(items, artifacts),
                   result_key, fresh)
    job_id = store.create(spec)
    if store.data_id(job_id) != job_id:
        return job_id
    for name, value in artifacts.items():
        store.put_artifact(job_id, name, value)
    keys = MsdKeys(settings.key_prefix)
    index_job(store.redis, keys.index(req.trace_query_id), req.user, job_id, settings.job_ttl_s)
    dispatcher.start(job_id)
    return job_id


def index_job(redis, key: str, user: str | None, job_id: str, ttl_s: int) -> None:
    """Record ``job_id`` as ``user``'s job of a trace_query_id (the hash ``key``, expiring)."""
    pipe = redis.pipeline(transaction=False)
    pipe.hset(key, owners.scope(user), job_id)
    pipe.expire(key, ttl_s)
    pipe.execute()
