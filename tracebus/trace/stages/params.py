"""The MSD stage requests: their declarations (fields, limits, messages) and checked forms (pure).

:data:`SEED_REQUEST` and :data:`LINEAGE_REQUEST` declare the bodies of ``POST
/api/trace/seed-resolve`` and ``/lineage`` (:mod:`tracebus.jobs.fields`: the checks and the
OpenAPI schemas both come from them). :class:`SeedRequest` and :class:`LineageRequest` are what
:meth:`~tracebus.trace.stages.answers.MsdStages.check_seed` / ``check_lineage`` return: enough to
decide sync or job (:mod:`tracebus.trace.stages.jobs`) and to run the stage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from tracebus.jobs.fields import Choice, Custom, Field
from tracebus.jobs.list_fields import Strings
from tracebus.jobs.shapes import DateSpan, Obj, Shape
from tracebus.trace import domains, kinds
from tracebus.trace.domains import DEFAULT_STATION, DIRECTIONS, MAX_RANGE_DAYS, PROFILES
from tracebus.trace.errors import CidLimitExceeded, InvalidProfile

MODES = ("date_range", "container")
#: The container modes of the MSD filter bar (FilterBar.vue), in the original's message order:
#: serial_number is resolved at any station (the lot resolver), the others at the station.
RESOLVE_TYPES = ("lot_id", "work_order", "wafer_lot", "serial_number", "gd_work_order", "gd_lot_id")
#: Longest accepted container id or seed value.
MAX_VALUE_LENGTH = 64


@dataclass(frozen=True)
class SeedRequest:
    """A checked seed-resolve request: its params (JSON, as sent), mode and station, the
    dates (date mode) or ``(resolve_type, values)`` (container mode), and its profile."""

    params: dict
    mode: str
    station: str
    dates: tuple[str, str] | None = None
    container: tuple[str, list[str]] | None = None
    profile: str = ""

    @property
    def days(self) -> int:
        """Days between start and end (0 in container mode)."""
        if self.dates is None:
            return 0
        return (date.fromisoformat(self.dates[1]) - date.fromisoformat(self.dates[0])).days


@dataclass(frozen=True)
class LineageRequest:
    """A checked lineage request: profile, deduplicated seeds, direction and ``query_id``."""

    profile: str
    seeds: list[str]
    direction: str
    query_id: str




def _direction_text() -> str:
    """What :data:`DIRECTION`'s schema says, from the kinds' declarations (they register after
    this module loads): the profiles that read it, and the direction the others take."""
    trees = ", ".join(f"{profile} {answer}" for answer in ("forward", "backward")
                      for profile in kinds.lineage_profiles(answer))
    return (f"used by {' and '.join(kinds.lineage_profiles(kinds.COMPACT))} only (empty or null: backward); "
            f"the other profiles take it from the profile: {trees}")


#: The direction of a stage request (``params.direction``; empty or null: backward).
DIRECTION = Choice("direction", choices=DIRECTIONS, default="backward", description=_direction_text)
#: The date range of a seed-resolve request in date mode.
SEED_DATES = DateSpan(MAX_RANGE_DAYS, pair="date_range",
                      missing="start_date and end_date (or date_range) are required in date_range mode",
                      malformed="dates must be YYYY-MM-DD, got start_date {start!r} and end_date {end!r}")


def _station(value: Any) -> str:
    station = value or DEFAULT_STATION
    domains.normalize_stations(station)  # an unknown station is a 400 before any query
    return station


def _params(fields: Shape) -> Obj:
    return Obj("params", invalid="params must be an object, got {type}", fields=fields)


#: ``params`` of ``POST /api/trace/seed-resolve``: the mode, then its dates or its container values.
SEED_PARAMS = Shape((
    Choice("mode", choices=MODES, default="date_range", lenient=True),
    DIRECTION,
    Custom("station", default=DEFAULT_STATION, check_value=_station,
           json={"type": "string", "description": "workcenter group(s), comma-separated; default 測試"}),
    Choice("resolve_type", choices=RESOLVE_TYPES, lenient=True,
           invalid="resolve_type must be one of: {choices}; got {value!r}"),
    Strings("values", default=[], not_list="{name} must be a list of strings, got {type}",
            max_length=MAX_VALUE_LENGTH, empty="values must contain at least one query value",
            max_items="cid_limit", over_limit=CidLimitExceeded, conditional=True,
            description="container mode: the values of resolve_type"),
), spans=(SEED_DATES,))
#: ``POST /api/trace/seed-resolve`` (the profiles whose kind resolves seeds: :data:`tracebus.trace.kinds.SEED_PROFILES`).
SEED_REQUEST = Shape((
    Choice("profile", required=True, choices=kinds.SEED_PROFILES, error=InvalidProfile,
           invalid="seed-resolve serves profile '{choices}' only; got {value!r}"),
    replace(_params(SEED_PARAMS), required=True),
))
#: ``POST /api/trace/lineage``.
LINEAGE_REQUEST = Shape((
    Choice("profile", required=True, choices=PROFILES, error=InvalidProfile,
           invalid="unknown profile {value!r}; known: {choices}"),
    _params(Shape((DIRECTION,))),
    Strings("container_ids", required=True, default=[], not_list="{name} must be a list of strings, got {type}",
            max_length=MAX_VALUE_LENGTH, empty="container_ids must contain at least one id",
            max_items="cid_limit", over_limit=CidLimitExceeded),
    Field("cache_key", description="ignored (the seed stage's cache_key, sent back by the page)"),
))
