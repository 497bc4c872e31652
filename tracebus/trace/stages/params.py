"""The checked forms of the MSD stage requests and the validators of their fields (pure).

:class:`SeedRequest` and :class:`LineageRequest` are what
:meth:`~tracebus.trace.stages.answers.MsdStages.check_seed` / ``check_lineage`` return: enough to
decide sync or job (:mod:`tracebus.trace.stages.jobs`) and to run the stage. The validators raise
:class:`~tracebus.errors.InvalidParams` with a message that says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Mapping

from tracebus.errors import InvalidParams
from tracebus.trace.msd.params import DIRECTIONS

#: Longest date range, in days between start and end (DOMAIN.md section 5: "date_range (≤180 d)").
MAX_RANGE_DAYS = 180
#: Longest accepted container id or seed value.
MAX_VALUE_LENGTH = 64


@dataclass(frozen=True)
class SeedRequest:
    """A checked seed-resolve request: its params (JSON, as sent), mode and station, and the
    dates (date mode) or ``(resolve_type, values)`` (container mode)."""

    params: dict
    mode: str
    station: str
    dates: tuple[str, str] | None = None
    container: tuple[str, list[str]] | None = None

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


def clean_strings(values: Any, field: str) -> list[str]:
    """A list of strings, trimmed and deduplicated (order kept); non-strings are skipped.

    Raises:
        InvalidParams: ``values`` is not a list, or a value is longer than :data:`MAX_VALUE_LENGTH`.
    """
    if not isinstance(values, list):
        raise InvalidParams(f"{field} must be a list of strings, got {type(values).__name__}")
    out = list(dict.fromkeys(v.strip() for v in values if isinstance(v, str) and v.strip()))
    too_long = next((v for v in out if len(v) > MAX_VALUE_LENGTH), None)
    if too_long is not None:
        raise InvalidParams(f"{field}: value longer than {MAX_VALUE_LENGTH} characters: {too_long[:80]!r}")
    return out


def direction_of(params: Mapping) -> str:
    """``params.direction`` (default backward).

    Raises:
        InvalidParams: a direction other than backward / forward.
    """
    direction = params.get("direction")
    if direction is None or direction == "":
        return "backward"
    if not isinstance(direction, str) or direction not in DIRECTIONS:
        raise InvalidParams(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    return direction


def date_range(params: Mapping) -> tuple[str, str]:
    """``date_range: [start, end]`` or ``start_date`` / ``end_date``, checked.

    Raises:
        InvalidParams: missing, malformed or inverted dates, or more than :data:`MAX_RANGE_DAYS` days.
    """
    pair = params.get("date_range")
    if isinstance(pair, list) and len(pair) == 2 and all(pair):
        start, end = (str(v).strip() for v in pair)
    else:
        start, end = (str(params.get(k) or "").strip() for k in ("start_date", "end_date"))
    if not start or not end:
        raise InvalidParams("start_date and end_date (or date_range) are required in date_range mode")
    try:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
    except ValueError:
        raise InvalidParams(f"dates must be YYYY-MM-DD, got start_date {start!r} and end_date {end!r}") from None
    if first > last:
        raise InvalidParams(f"start_date {start} is after end_date {end}")
    if (last - first).days > MAX_RANGE_DAYS:
        raise InvalidParams(f"the date range {start} .. {end} spans {(last - first).days} days; "
                            f"at most {MAX_RANGE_DAYS} are allowed")
    return start, end
