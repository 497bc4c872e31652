"""MSD request parameters: parsing, normalisation and the ids derived from them (MSD.md §1.1-1.2, §3).

:data:`MSD_PARAMS` declares the events request's ``params`` of profile ``mid_section_defect``
(each field read as the original reads it; the OpenAPI ``TraceRequest`` is derived from it), and
pure functions read them. The parsed :class:`MsdParams` is what
every fold and finalize of :mod:`tracebus.trace.msd` takes, so the masks of §1.3 (population
``pj_types``/``packages``, numerator ``loss_reasons``) and the station filter of §1.4 are decided
once, here.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Choice, Custom
from tracebus.jobs.shapes import DateSpan, Shape
from tracebus.trace.domains import DEFAULT_STATION, DIRECTIONS, MAX_RANGE_DAYS, NO_SEQUENCE, WORKCENTER_GROUPS

#: The date range of an MSD events request (``params.start_date`` / ``end_date``, date mode).
EVENTS_DATES = DateSpan(MAX_RANGE_DAYS, too_long="date range is {days} days; at most {max} allowed")
_TRACE_QUERY_ID_VERSION = 2


def parse_loss_reasons(value: Any) -> list[str] | None:
    """Normalise ``loss_reasons``: a comma string or a list; trimmed, deduplicated, empty → None.

    Non-string list items are ignored, like the original's ``parse_loss_reasons_param``.
    """
    if isinstance(value, str):
        values = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple, set)):
        values = [v.strip() for v in value if isinstance(v, str)]
    else:
        return None
    out = list(dict.fromkeys(v for v in values if v))
    return out or None


def parse_text_list(value: Any) -> list[str] | None:
    """Normalise ``pj_types``/``packages``: a list of values, each trimmed; empty → None.

    A non-list (e.g. a string) is ignored as the original does (its mask then does not apply).
    """
    if not isinstance(value, (list, tuple)):
        return None
    out = [str(v).strip() for v in value if v is not None and str(v).strip()]
    return out or None


def normalize_stations(station: Any) -> list[str]:
    """Split the station parameter on commas; trimmed, deduplicated, sorted; default ``["測試"]``."""
    if isinstance(station, (list, tuple)):
        parts = [str(s).strip() for s in station if s]
    else:
        parts = [s.strip() for s in str(station or "").split(",")]
    return sorted({p for p in parts if p}) or [DEFAULT_STATION]


def group_order(group_name: str | None) -> int:
    """Order of a workcenter *group name* (exact match, like ``get_group_order``); unknown → 999."""
    for group in WORKCENTER_GROUPS:
        if group.name == group_name:
            return group.order
    return NO_SEQUENCE


def _mode(value: Any) -> str:
    return str(value or "").strip()


#: ``params`` of an MSD events request (profile ``mid_section_defect``; the kind's ``profile_params``
#: keeps these keys, drops any other): each read as the original reads it, so most take any JSON
#: value (what they do not understand they ignore: no mask, the default); the schema says so.
MSD_PARAMS = Shape((
    Choice("direction", choices=DIRECTIONS, default="backward", lenient=True,
           description="read as text, stripped; blank: backward"),
    Custom("station", json={"description": "the detection station(s): workcenter group names, comma-separated or "
                                           f"a list; default {DEFAULT_STATION}; an unknown one: 400"}),
    Custom("loss_reasons", check_value=parse_loss_reasons,
           json={"description": "the numerator's mask (MSD.md 1.3): reasons, comma-separated or a list (items "
                                "that are not strings are ignored); none: every reason"}),
    Custom("pj_types", check_value=parse_text_list,
           json={"description": "the population's mask on TRIM(PJ_TYPE): a list (anything else: no mask)"}),
    Custom("packages", check_value=parse_text_list,
           json={"description": "the population's mask on TRIM(PRODUCTLINENAME): a list (anything else: no mask)"}),
    Custom("mode", check_value=_mode, json={"description": "`container`: detection over the whole fetch set (the "
                                                          "seeds and their lineage); anything else: the date range"}),
    Custom("start_date", json={"description": "date mode: YYYY-MM-DD, the detection window's first day; at most "
                                              f"{EVENTS_DATES.max_days} days before end_date"}),
    Custom("end_date", json={"description": "date mode: YYYY-MM-DD, the detection window's last day"}),
), description="what profile mid_section_defect reads (MSD.md 1.1)")


@dataclass(frozen=True, slots=True)
class MsdParams:
    """The parsed MSD parameters of one events request.

    Attributes:
        direction: ``"backward"`` or ``"forward"``.
        stations: the normalised station list (sorted).
        station_raw: the station parameter as sent (it enters ``trace_query_id`` unchanged).
        loss_reasons: numerator mask of §1.3, or None.
        pj_types: population mask on ``TRIM(PJ_TYPE)``, or None.
        packages: population mask on ``TRIM(PRODUCTLINENAME)``, or None.
        start_date: date-mode window start, or None (container mode).
        end_date: date-mode window end, or None.
    """

    direction: str = "backward"
    stations: tuple[str, ...] = (DEFAULT_STATION,)
    station_raw: str | None = None
    loss_reasons: tuple[str, ...] | None = None
    pj_types: tuple[str, ...] | None = None
    packages: tuple[str, ...] | None = None
    start_date: str | None = None
    end_date: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> "MsdParams":
        """Parse the request's ``params`` object (§1.1), read by :data:`MSD_PARAMS`.

        Raises:
            InvalidParams: ``params`` is not an object, or ``direction`` is unknown.
        """
        params = {} if params is None else params
        if not isinstance(params, Mapping):
            raise InvalidParams("params must be an object")
        direction = MSD_PARAMS.value(params, "direction")
        raw_station = params.get("station")
        loss = MSD_PARAMS.value(params, "loss_reasons")
        pj = MSD_PARAMS.value(params, "pj_types")
        pkg = MSD_PARAMS.value(params, "packages")
        return cls(
            direction=direction,
            stations=tuple(normalize_stations(raw_station or DEFAULT_STATION)),
            station_raw=raw_station if isinstance(raw_station, str) else None,
            loss_reasons=tuple(loss) if loss else None,
            pj_types=tuple(pj) if pj else None,
            packages=tuple(pkg) if pkg else None,
            start_date=str(params["start_date"]) if params.get("start_date") else None,
            end_date=str(params["end_date"]) if params.get("end_date") else None,
        )

    @property
    def station_order(self) -> int:
        """``station_order_fallback``: the minimum group order of the stations (999 if none known)."""
        return min(group_order(s) for s in self.stations)

    @property
    def upstream_groups(self) -> frozenset[str] | None:
        """Groups strictly before the station, or None (no filter) when the order is 999."""
        order = self.station_order
        if order >= NO_SEQUENCE:
            return None
        return frozenset(g.name for g in WORKCENTER_GROUPS if g.order < order)


def _short_hash(key: Mapping[str, Any]) -> str:
    canonical = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


#: The shape of every :func:`trace_query_id` (a request's value is checked before it becomes a key).
TRACE_QUERY_ID = re.compile(r"msd-[0-9a-f]{16}")


def trace_query_id(profile: str, container_ids: Iterable[str], *, start_date: str | None = None,
                   end_date: str | None = None, station: str | None = None,
                   direction: str | None = None) -> str:
    """``make_trace_query_id`` of §3: ``"msd-"`` + 16 hex of the canonical key; empty fields omitted.

    ``station`` is the raw parameter string; loss reasons, types and packages are not part of it
    because they are applied at read time.
    """
    key: dict[str, Any] = {"_v": _TRACE_QUERY_ID_VERSION, "profile": profile,
                           "container_ids": sorted(container_ids or [])}
    for name, value in (("start_date", start_date), ("end_date", end_date),
                        ("station", station), ("direction", direction)):
        if value:
            key[name] = value
    return "msd-" + _short_hash(key)


def detection_hash(start_date: str | None, end_date: str | None, stations: Iterable[str]) -> str:
    """``detection_hash`` of §1.2: the cache key of the ``msd_detect`` detection spool."""
    return _short_hash({"end_date": end_date, "start_date": start_date,
                        "station": ",".join(sorted(stations))})
