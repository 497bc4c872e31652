"""The MSD page's lookups: station options, loss reasons, container filter options (MSD.md section 7).

The original reads the last two from caches refreshed in the background (loss reasons daily,
the filter tuples on a schedule, with ``updated_at`` and ``schema_version``). :class:`MsdLookups`
keeps them per process for ``ttl_s`` (one source read per API worker and period, not per page
load); the station options need no query. The ``selected`` parameter of the filter options is
URL-encoded JSON; :func:`parse_selected` rejects a malformed one.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Json
from tracebus.jobs.shapes import Query
from tracebus.trace import domains
from tracebus.trace.settings import TraceSettings
from tracebus.trace.msd.reads import FILTER_KEYS, MsdReads, cross_filter
from tracebus.trace.sources import EventSource, open_source, read_once

#: ``meta.schema_version`` of the filter options (the original's container_filter_cache value).
SCHEMA_VERSION = 2
#: How long a loaded lookup is kept by one process.
DEFAULT_TTL_S = 600


def parse_selected(raw: str | None) -> dict | None:
    """The ``selected`` query parameter: None when absent or empty, else a JSON object.

    Raises:
        InvalidParams: not JSON, JSON that is not an object, or a known key that is not a list
            of strings.
    """
    if raw is None or not raw.strip():
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise InvalidParams(f"selected must be valid JSON (selected 參數需為合法 JSON): {e}") from None
    if not isinstance(parsed, dict):
        raise InvalidParams(f"selected must be a JSON object (selected 參數需為 JSON 物件), "
                            f"got {type(parsed).__name__}")
    for key in FILTER_KEYS:
        values = parsed.get(key)
        if values is not None and not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
            raise InvalidParams(f"selected.{key} must be a list of strings (selected.{key} 需為字串陣列)")
    return parsed


#: The query string of ``GET /api/mid-section-defect/container-filter-options``: ``selected``,
#: read by :func:`parse_selected`.
SELECTED_QUERY = Query((Json(
    "selected", check_value=parse_selected,
    json={"type": "object", "properties": {k: {"type": "array", "items": {"type": "string"}} for k in FILTER_KEYS}},
    description=f"URL-encoded JSON object {{{', '.join(FILTER_KEYS)}}}; unknown keys and values are ignored; "
                "not a JSON object: 400"),))


class MsdLookups:
    """The lookups, cached per process.

    Args:
        settings(TraceSettings): the source.
        source_factory: builds an event source (opened and closed per load).
        ttl_s(float): how long a load is kept.
        clock: wall-clock seconds (``updated_at`` and expiry).
        run: calls ``fn()`` for a source read (the API runs it off its event loop).
    """

    def __init__(self, settings: TraceSettings,
                 source_factory: Callable[[TraceSettings], EventSource] = open_source,
                 ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time,
                 run: Callable = lambda fn, *args: fn(*args)):
        self.settings, self.source_factory, self.ttl_s, self.clock = settings, source_factory, ttl_s, clock
        self.run = run
        self._loaded: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def _load(self, name: str, read: Callable[[EventSource], Any]) -> tuple[float, Any]:
        """``(loaded_at, value)`` of a lookup, read from the source when missing or older than ttl_s."""
        with self._lock:
            hit = self._loaded.get(name)
            if hit is not None and self.clock() - hit[0] < self.ttl_s:
                return hit
        value = self.run(lambda: read_once(self.source_factory, self.settings, read))
        hit = (self.clock(), value)
        with self._lock:
            self._loaded[name] = hit
        return hit

    def station_options(self) -> list[dict]:
        """``[{name, label, order}]`` of every workcenter group, in order (no query)."""
        return domains.station_options()

    def loss_reasons(self) -> dict:
        """``{loss_reasons: [str]}``: every reject reason the source knows, sorted."""
        return {"loss_reasons": list(self._load("loss_reasons", lambda s: MsdReads(s).loss_reasons())[1])}

    def container_filter_options(self, selected: dict | None) -> tuple[dict, dict]:
        """The filter options cross-filtered by ``selected`` (read by :data:`SELECTED_QUERY`), and their meta.

        Returns:
            ``({pj_types, packages, bops, pj_functions}, {updated_at, schema_version})``;
            ``updated_at`` is when the options were read (ISO 8601, UTC).
        """
        loaded_at, tuples = self._load("filter_tuples", lambda s: MsdReads(s).container_filter_tuples())
        options = cross_filter(tuples, selected)
        updated_at = datetime.fromtimestamp(loaded_at, timezone.utc).isoformat(timespec="seconds")
        return ({key: options.get(key) or [] for key in FILTER_KEYS},
                {"updated_at": updated_at, "schema_version": SCHEMA_VERSION})
