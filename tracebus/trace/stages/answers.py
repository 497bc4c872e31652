"""The MSD page's first two stages: ``seed-resolve`` and ``lineage`` (MSD.md section 7, DOMAIN.md 4-5).

:class:`MsdStages` validates the stage requests, reads the source and answers in the original's
shapes (routes/trace_routes.py of the dashboard):

* seed-resolve, profile ``mid_section_defect``: date-range mode (``station``, ``start_date`` /
  ``end_date`` or ``date_range``, at most :data:`~tracebus.trace.domains.MAX_RANGE_DAYS` days) or container mode
  (``resolve_type`` / ``values``; ``serial_number`` through the lot resolver, at any station,
  with ``not_found``), answered ``{stage, seed_count, cache_key, query_id,
  seed_container_ids[, seeds, not_found]}``. A container mode that finds nothing raises
  :class:`NoDetectionRecords` with the original's hint (its 404); a date range without seeds is
  the original's empty answer (``seed_count`` 0).
* lineage: MSD, ``params.direction`` backward (ancestors) or forward (children), the whole
  answer (``to_dict()`` plus ``direction`` and ``seeds``) stored in the
  :class:`~tracebus.trace.lineage_cache.LineageCache` under its ``query_id`` with the job TTL,
  where the events stage finds it, and the original's compact answer (``query_id``, counts,
  ``seed_roots``) sent; the query-tool page, the direction by profile (``query_tool`` forward,
  ``query_tool_reverse`` backward; ``params`` ignored, as there) and the original's trees
  (:mod:`tracebus.trace.stages.trees`: ``children_map`` / ``parent_map``, ``names``,
  ``nodes``, ``edges``), stored under their own ``query_id`` and sent whole.

Each stage is checked first (:meth:`MsdStages.check_seed`, :meth:`MsdStages.check_lineage`:
bad input is a 400 before any query or job) and then run (``run_seed``, ``run_lineage``), in the
API process for small requests or in a worker for large ones (:mod:`tracebus.trace.stages.jobs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any, Callable, Mapping

import redis

from tracebus.trace.errors import NoDetectionRecords
from tracebus.trace.kinds import COMPACT, lineage_of
from tracebus.trace.lineage_cache import LineageCache, lineage_query_id, pack, unpack
from tracebus.trace.settings import TraceSettings
from tracebus.errors import InvalidParams
from tracebus.trace.sources import EventSource, open_source, read_once
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.stages.seeds import SeedReads, like_regex, pattern_literals
from tracebus.trace.stages.params import (DIRECTION, LINEAGE_REQUEST, SEED_DATES, SEED_PARAMS, SEED_REQUEST,
                                          LineageRequest, SeedRequest)
from tracebus.trace.stages.trees import TreeReads

log = logging.getLogger(__name__)

SERIAL = "serial_number"
#: Characters a serial_number pattern needs besides its wildcards.
MIN_PATTERN_LITERALS = 3
#: Parameters that do not change the seed set (read-time masks), left out of its ids as the original does.
_NOT_SEED_KEYS = frozenset({"loss_reasons", "pj_types", "packages"})


def seed_ids(profile: str, params: Mapping) -> tuple[str, str]:
    """The original's seed ``cache_key`` and tracebus's ``query_id`` of a seed-resolve request of ``profile``.

    Both hash the parameters that decide the seed set (not the read-time masks), so one
    staged trace serves every reason / type / package selection, as in the original.
    """
    kept = {k: v for k, v in params.items() if k not in _NOT_SEED_KEYS}
    dumped = json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return (f"trace:seed:{profile}:" + hashlib.md5(dumped.encode()).hexdigest()[:12],
            "seed-" + hashlib.sha256(dumped.encode()).hexdigest()[:16])


class MsdStages:
    """The seed-resolve and lineage operations.

    Args:
        settings(TraceSettings): the source, the CID cap, the job TTL, the key prefix.
        client(redis.Redis): the Redis of the jobs (the lineage cache lives there).
        source_factory: builds an event source; one is opened and closed per request.
        run: calls ``fn()`` for each source read (the API runs it off its event loop; the
            lineage cache's Redis calls stay in the caller).
    """

    def __init__(self, settings: TraceSettings, client: redis.Redis,
                 source_factory: Callable[[TraceSettings], EventSource] = open_source,
                 run: Callable = lambda fn, *args: fn(*args)):
        self.settings = settings
        self.cache = LineageCache(client, settings.key_prefix, settings.job_ttl_s, settings.user_max_bytes)
        self.source_factory = source_factory
        self.run = run

    def _with_source(self, read: Callable[[EventSource], Any]) -> Any:
        return self.run(lambda: read_once(self.source_factory, self.settings, read))

    def check_seed(self, body: Any) -> SeedRequest:
        """Validate a seed-resolve body (no source read).

        Raises:
            InvalidParams: a malformed body, unknown mode / direction / station /
                resolve_type, no values, or a bad date range (the message says which).
            InvalidProfile: a profile other than ``mid_section_defect``.
            CidLimitExceeded: more values than ``TRACE_EVENTS_CID_LIMIT``.
        """
        checked = SEED_REQUEST.check(body)
        profile, params = checked["profile"], checked["params"]
        mode = SEED_PARAMS.value(params, "mode")
        SEED_PARAMS.value(params, "direction")
        station = SEED_PARAMS.value(params, "station")
        if mode == "date_range":
            return SeedRequest(params, mode, station, dates=SEED_DATES.check(params), profile=profile)
        limits = {"cid_limit": self.settings.events_cid_limit}
        container = (SEED_PARAMS.value(params, "resolve_type"), SEED_PARAMS.value(params, "values", limits))
        if container[0] == SERIAL:
            check_serial_patterns(container[1], self.settings.serial_max_patterns)
        return SeedRequest(params, mode, station, container=container, profile=profile)

    def run_seed(self, req: SeedRequest, user: str | None = None) -> dict:
        """The seeds of a checked request (one source read; ``user`` is taken as by
        :meth:`run_lineage`, and nothing of this answer is kept).

        Returns:
            ``{stage: "seed-resolve", seed_count, cache_key, query_id, seed_container_ids}``,
            plus ``seeds: [{container_id, container_name, lot_id}]`` in container mode, and
            ``not_found`` (the values that matched nothing) for ``serial_number``.

        Raises:
            NoDetectionRecords: container mode found no lot at the station (for
                ``serial_number``: no container at all).
            SourceError: the source failed.
        """
        started = time.monotonic()
        not_found = None
        if req.mode == "date_range":
            seeds = self._with_source(lambda s: SeedReads(s).seeds_by_dates(req.station, *req.dates))
        elif req.container[0] == SERIAL:
            seeds, not_found = self._with_source(lambda s: SeedReads(s).resolve_serials(req.container[1]))
            if not seeds:
                raise NoDetectionRecords("找不到符合條件的容器，請確認輸入值是否正確 (no container has these "
                                         "serial numbers, names or wafer lots)")
        else:
            seeds = self._with_source(lambda s: SeedReads(s).resolve_seeds(*req.container, req.station))
            if not seeds:
                resolve_type = req.params.get("resolve_type")
                raise NoDetectionRecords(f"所輸入的{resolve_type}在偵測站「{req.station}」無歷史記錄，"
                                         "請確認輸入值是否正確或嘗試其他偵測站 (no lot with these values "
                                         f"has a track-in at station {req.station!r})")
        cache_key, query_id = seed_ids(req.profile, req.params)
        log.info("seed-resolve %s: %d seeds in %.2f s", req.mode, len(seeds), time.monotonic() - started)
        answer = {"stage": "seed-resolve", "seed_count": len(seeds), "cache_key": cache_key,
                  "query_id": query_id, "seed_container_ids": [cid for cid, _ in seeds]}
        if req.mode == "container":
            answer["seeds"] = [{"container_id": cid, "container_name": name or cid, "lot_id": name or cid}
                               for cid, name in seeds]
        if not_found is not None:
            answer["not_found"] = not_found
        return answer

    def check_lineage(self, body: Any) -> LineageRequest:
        """Validate a lineage body (no source read). The direction is MSD's ``params.direction``,
        or the one its kind declares for the profile (:func:`tracebus.trace.kinds.lineage_of`).

        Raises:
            InvalidParams: a malformed body, no container_ids, an unknown direction.
            InvalidProfile: an unknown profile.
            CidLimitExceeded: more seeds than ``TRACE_EVENTS_CID_LIMIT``.
        """
        checked = LINEAGE_REQUEST.check(body, {"cid_limit": self.settings.events_cid_limit})
        profile, seeds = checked["profile"], checked["container_ids"]
        direction = DIRECTION.check(checked["params"].get("direction"), {})  # every profile's; MSD's only is used
        if lineage_of(profile) == COMPACT:
            return LineageRequest(profile, seeds, direction, lineage_query_id(direction, seeds))
        direction = lineage_of(profile)
        return LineageRequest(profile, seeds, direction, lineage_query_id(direction, seeds, tree=profile))

    def run_lineage(self, req: LineageRequest, user: str | None = None) -> dict:
        """The lineage of a checked request, stored under its ``query_id`` for the events stage.

        Returns:
            MSD: ``{stage: "lineage", query_id, trace_lineage_query_id, total_nodes,
            total_ancestor_count[, seed_roots]}`` (the original's compact answer); the
            query-tool profiles: ``{stage, query_id, direction, **tree}`` (the original's
            forward or reverse tree, :mod:`tracebus.trace.stages.trees`).

        Args:
            user(str | None): who asks: the answer kept is charged to their budget, and a
                user already past it is refused before the source is read.

        Raises:
            SourceError: the source failed. BrokerError: Redis is down.
            BudgetExceeded: ``user`` holds their budget already.
        """
        packed = self.cache.get_packed(req.query_id)
        if packed is not None:
            stored = self.run(unpack, packed)
        else:
            if user is not None:
                self.cache.budget.check(user)
            started, seeds = time.monotonic(), req.seeds

            def trace(source: EventSource) -> tuple[dict, bytes]:  # packed here too: off the API's loop
                if lineage_of(req.profile) != COMPACT:
                    trees = TreeReads(source)
                    tree = trees.forward_tree(seeds) if req.direction == "forward" else trees.reverse_tree(seeds)
                    tree.update(profile=req.profile)
                else:
                    lineage = LineageReads(source)
                    tree = (lineage.lineage_forward(seeds) if req.direction == "forward"
                            else lineage.lineage_backward(seeds)).to_dict()
                tree.update(direction=req.direction, seeds=seeds)
                return tree, pack(tree)

            stored, packed = self._with_source(trace)
            self.cache.put(req.query_id, packed, user)
            log.info("lineage %s: %d seeds, %d nodes in %.2f s", req.direction, len(seeds),
                     stored.get("total_nodes", 0), time.monotonic() - started)
        if lineage_of(req.profile) == COMPACT:
            return compact(req.query_id, stored)
        whole = {k: v for k, v in stored.items() if k not in ("seeds", "profile")}
        return {"stage": "lineage", "query_id": req.query_id, **whole}


def serial_patterns(values: list[str]) -> list[str]:
    """The serial_number values that are LIKE patterns (each a full scan of its sources)."""
    return [v.strip() for v in values if like_regex(v.strip()) is not None]


def check_serial_patterns(values: list[str], max_patterns: int) -> None:
    """Bound a serial_number resolve's patterns: at most ``max_patterns``
    (``TRACE_SERIAL_MAX_PATTERNS``), each with at least :data:`MIN_PATTERN_LITERALS` characters
    besides its wildcards (a lone ``%`` matches every container).

    Raises:
        InvalidParams: the message names the limit.
    """
    patterns = list(dict.fromkeys(serial_patterns(values)))
    if len(patterns) > max_patterns:
        raise InvalidParams(f"{len(patterns)} serial_number values have a wildcard (%, _ or *); the limit is "
                            f"{max_patterns} (TRACE_SERIAL_MAX_PATTERNS)")
    for pattern in patterns:
        if pattern_literals(pattern) < MIN_PATTERN_LITERALS:
            raise InvalidParams(f"serial_number pattern {pattern[:64]!r} needs at least {MIN_PATTERN_LITERALS} "
                                "characters besides its wildcards (a lone % would match every container)")


def compact(query_id: str, stored: Mapping) -> dict:
    """The original's ``_compact_msd_lineage_response``: ids, counts and the seeds' roots."""
    answer = {"stage": "lineage", "query_id": query_id, "trace_lineage_query_id": query_id,
              "total_nodes": int(stored.get("total_nodes") or 0),
              "total_ancestor_count": int(stored.get("total_ancestor_count") or 0)}
    if stored.get("seed_roots"):
        answer["seed_roots"] = stored["seed_roots"]
    return answer
