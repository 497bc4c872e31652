"""MSD reads of an event source: detection rows, container-mode seeds and the page's lookups.

:class:`MsdReads` is mixed into :class:`~.base.EventSource`, so the SQLite and the Oracle
source share it; it only needs the source's ``dialect`` and ``_execute``. The statements
are in :mod:`.msd_sql`. Detection rows come in ``(columns, rows)`` batches like
:meth:`~.base.EventSource.fetch`, one IN list (≤ :data:`~.batching.IN_LIMIT` CIDs) at a time,
never all at once.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from typing import Iterable, Iterator, Mapping

from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.sources import msd_sql
from tracebus.trace.sources.batching import IN_LIMIT, Batch, in_lists, unique_cids

#: The keys of a cross-filter selection, each a list of strings.
FILTER_KEYS = ("pj_types", "packages", "bops", "pj_functions")
_FILTER_KEYS = FILTER_KEYS

#: Step A as the original (mid_section_defect_service._resolve_detection_cids): a range of
#: more than SPLIT_OVER_DAYS days (BATCH_QUERY_TIME_THRESHOLD_DAYS) is read in windows of
#: WINDOW_DAYS days (batch_query_engine.decompose_by_time_range), PARALLEL at a time
#: (MSD_ENGINE_PARALLEL), so no one statement spans a long range.
SPLIT_OVER_DAYS, WINDOW_DAYS, PARALLEL = 10, 31, 3


def window(start_date: str, end_date: str) -> tuple[str, str]:
    """The [start, end + 1 day) ISO bounds of an MSD date range given as 'YYYY-MM-DD' texts.

    Raises:
        InvalidParams: a date is malformed or the start is after the end.
    """
    try:
        start, end = date.fromisoformat(start_date), date.fromisoformat(end_date)
    except (TypeError, ValueError):
        raise InvalidParams(f"dates must be YYYY-MM-DD, got {start_date!r} and {end_date!r}") from None
    if start > end:
        raise InvalidParams(f"start_date {start_date} is after end_date {end_date}")
    return f"{start} 00:00:00", f"{end + timedelta(days=1)} 00:00:00"


def step_a_windows(start_date: str, end_date: str) -> list[tuple[str, str]]:
    """The [start, end) ISO bounds of step A's statements for an MSD date range: the whole
    range up to :data:`SPLIT_OVER_DAYS` days, else consecutive :data:`WINDOW_DAYS`-day windows
    (the last one shorter), as the original's closed [chunk_start, chunk_end] days.

    Raises:
        InvalidParams: a date is malformed or the start is after the end.
    """
    whole = window(start_date, end_date)
    start, end = date.fromisoformat(start_date), date.fromisoformat(end_date)
    if (end - start).days <= SPLIT_OVER_DAYS:
        return [whole]
    out, day = [], start
    while day <= end:
        last = min(day + timedelta(days=WINDOW_DAYS - 1), end)
        out.append(window(str(day), str(last)))
        day = last + timedelta(days=1)
    return out


def _clean(values) -> list[str]:
    if isinstance(values, str):
        values = [values]
    return list(dict.fromkeys(str(v).strip() for v in (values or []) if str(v).strip()))


def cross_filter(tuples: Iterable[tuple], selected: Mapping | None) -> dict[str, list[str]]:
    """Narrow the filter options by a selection, as the original's container_filter_cache.

    Args:
        tuples: distinct (PJ_TYPE, PRODUCTLINENAME, PJ_BOP, PJ_FUNCTION), trimmed.
        selected: ``{pj_types, packages, bops, pj_functions}`` lists; other keys are ignored,
            unknown values dropped (fail-open).

    Returns:
        ``{pj_types, packages, bops, pj_functions}`` sorted lists. A dimension is narrowed by
        the *other* dimensions' selections only, so a user can keep adding values to it.
    """
    rows = [tuple(v or "" for v in t) for t in tuples if t[0] and t[1] and t[2]]
    full = [sorted({r[i] for r in rows if r[i]}) for i in range(4)]
    chosen = [set(_clean((selected or {}).get(key))) & set(full[i]) for i, key in enumerate(_FILTER_KEYS)]
    if not any(chosen):
        return dict(zip(_FILTER_KEYS, full))
    out = {}
    for i, key in enumerate(_FILTER_KEYS):
        keep = [r for r in rows if all(not chosen[j] or r[j] in chosen[j] for j in range(4) if j != i)]
        out[key] = sorted({r[i] for r in keep if r[i]})
    return out


def like_regex(token: str) -> re.Pattern | None:
    """The regex of a search token that is a LIKE pattern (``%``, ``_`` or ``*``; ``\\`` escapes
    the next character), None for a plain token: the original's ``_is_pattern_token`` and
    ``_to_like_regex``."""
    token = token.replace("*", "%")
    if "%" not in token and "_" not in token:
        return None
    parts, chars = [], iter(token)
    for ch in chars:
        if ch == "\\":
            ch = next(chars, ch)
            parts.append(re.escape(ch))
        else:
            parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(parts), re.DOTALL)


def pattern_literals(token: str) -> int:
    """Characters of a LIKE token that are not wildcards (an escaped one counts)."""
    count, chars = 0, iter(token)
    for ch in chars:
        if ch == "\\":
            next(chars, None)
            count += 1
        elif ch not in "%_*":
            count += 1
    return count


def _latest_track_ins(rows: Iterable[tuple]) -> list[tuple]:
    """Of ``(cid, workcenter, equipment id, equipment name, track-in time)`` rows, the first
    four columns of the latest per (cid, workcenter, equipment name), as the full statement's
    ``ROW_NUMBER() = 1``; on a tie in time (which the full statement leaves to the database)
    the larger equipment id."""
    latest: dict[tuple, tuple] = {}
    for row in rows:
        key = (row[0], row[1], row[3])
        kept = latest.get(key)
        if kept is None or row[4] > kept[4] or (row[4] == kept[4] and str(row[2]) > str(kept[2])):
            latest[key] = row
    return [row[:4] for row in latest.values()]


class MsdReads:
    """The MSD page's reads; mixed into :class:`~.base.EventSource`."""

    def backward_rows(self, domain: str, cids: list[str], batch_rows: int) -> Iterator[Batch]:
        """The rows of ``domain`` (upstream_history or materials) for ``cids``, narrowed to the
        columns the backward MSD job reads (:data:`.msd_sql.BACKWARD_COLUMNS`), in batches.

        The same rows as :meth:`~.base.EventSource.fetch` projected on those columns, the
        same number of them, in no particular order: the job folds them into sets and needs
        neither the other columns nor the order, and the full statements cost several times
        more to run (MSD.md §1.1 names the columns).

        Raises:
            InvalidParams: another domain, or a bad ``batch_rows``.
        """
        cols = msd_sql.BACKWARD_COLUMNS.get(domain)
        if cols is None:
            raise InvalidParams(f"the backward MSD job reads upstream_history and materials, not {domain!r}")
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise InvalidParams(f"batch_rows must be a positive integer, got {batch_rows!r}")
        return self._backward_rows(domain, list(cols), unique_cids(cids), batch_rows)

    def _backward_rows(self, domain: str, cols: list[str], cids: list[str], batch_rows: int) -> Iterator[Batch]:
        latest_here = domain == "upstream_history" and self.dialect.name == "sqlite"
        for ids, binds in in_lists(cids):
            batches = self._execute(msd_sql.backward_rows(self.dialect, domain, len(ids)), binds, batch_rows)
            if latest_here:
                kept = _latest_track_ins(row for rows in batches for row in rows)
                batches = (kept[i:i + batch_rows] for i in range(0, len(kept), batch_rows))
            for rows in batches:
                if rows:
                    yield cols, rows

    def _rows(self, sql: str, params: dict) -> list[tuple]:
        return [row for rows in self._execute(sql, params, 10000) for row in rows]

    def _step_a_rows(self, sql: str, params: dict, start_date: str, end_date: str) -> list[tuple]:
        """The rows of a step-A statement over a date range: one statement per window of
        :func:`step_a_windows`, :data:`PARALLEL` at a time (a source runs a statement from
        another thread on a connection of that thread). A failed window fails the read; the
        original drops it and flags the answer partial."""
        bounds = step_a_windows(start_date, end_date)
        binds = [params | {"t0": t0, "t1": t1} for t0, t1 in bounds]
        if len(binds) == 1:
            return self._rows(sql, binds[0])
        with ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="step-a") as pool:
            return [row for rows in pool.map(lambda b: self._rows(sql, b), binds) for row in rows]

    def _in_lists(self, sql_for, values: list[str], extra: dict | None = None) -> Iterator[list[tuple]]:
        """Run ``sql_for(n)`` once per IN list of ``values``; yield each list's rows."""
        for group, params in in_lists(values):
            yield self._rows(sql_for(len(group)), params | (extra or {}))

    def _detect(self, groups, cids: list[str], bounds, batch_rows: int) -> Iterator[Batch]:
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise InvalidParams(f"batch_rows must be a positive integer, got {batch_rows!r}")
        return self._detect_rows(groups, cids, bounds, batch_rows)

    def _detect_rows(self, groups, cids: list[str], bounds, batch_rows: int) -> Iterator[Batch]:
        h_filter, params = msd_sql.station_filter(self.dialect, groups, "h.WORKCENTERNAME")
        r_filter, _ = msd_sql.station_filter(self.dialect, groups, "r.WORKCENTERNAME")
        if bounds:
            params |= {"t0": bounds[0], "t1": bounds[1]}
        cols = list(domains.DETECTION_COLUMNS)
        joined_here = self.dialect.name == "sqlite"  # see msd_sql.detection_rows' ``parts``
        for group, binds in in_lists(cids):
            sql = msd_sql.detection_rows(self.dialect, len(group), h_filter, r_filter, timed=bool(bounds),
                                         parts=joined_here)
            batches = self._execute(sql, params | binds, batch_rows)
            if joined_here:
                joined = msd_sql.join_detection_parts(row for rows in batches for row in rows)
                batches = (joined[i:i + batch_rows] for i in range(0, len(joined), batch_rows))
            for rows in batches:
                if rows:
                    yield cols, rows

    def detect_by_dates(self, stations, start_date: str, end_date: str,
                        batch_rows: int = 5000) -> Iterator[Batch]:
        """The detection rows of the seeds of a date range (MSD.md section 1.1 and 7).

        Seeds are the lots with any track-in at a workcenter of ``stations`` within
        [start_date, end_date] whose EQUIPMENTID is set; each gets its latest such track-in
        and the station's rejects of the same window, one row per reason (a reject-free lot
        has one row with a NULL reason and REJECTQTY 0).

        Args:
            stations: ``"g1,g2"`` or a list of group names or keywords; empty means 測試.
            start_date, end_date: 'YYYY-MM-DD', both included.
            batch_rows: the largest batch to yield.

        Returns:
            An iterator of ``(columns, rows)`` with ``columns`` = ``domains.DETECTION_COLUMNS``,
            one IN list of seeds (in CID order) after another.

        Raises:
            InvalidParams: bad dates or an unknown station, at once.
            SourceError: while iterating, when the database fails.
        """
        bounds = window(start_date, end_date)
        groups = domains.normalize_stations(stations)
        station, params = msd_sql.station_filter(self.dialect, groups, "h.WORKCENTERNAME")
        self._detect(groups, [], bounds, batch_rows)  # validates batch_rows now, not when iterated

        def run():
            sql = msd_sql.detection_cids(self.dialect, station)
            cids = sorted({r[0] for r in self._step_a_rows(sql, params, start_date, end_date)})
            yield from self._detect_rows(groups, cids, bounds, batch_rows)

        return run()

    def seeds_by_dates(self, stations, start_date: str, end_date: str) -> list[tuple[str, str]]:
        """The seeds of a date range, as :meth:`detect_by_dates` picks them, without their rows.

        Cheaper than the detection: one statement per step-A window (:func:`step_a_windows`),
        no per-seed rejects (the seed-resolve stage needs only the seed set).

        Returns:
            ``[(cid, name)]`` sorted by name then CID (name = CID when the lot has none).

        Raises:
            InvalidParams: bad dates or an unknown station.
        """
        window(start_date, end_date)  # bad dates are a 400 before the station is looked at
        station, params = msd_sql.station_filter(self.dialect, domains.normalize_stations(stations), "h.WORKCENTERNAME")
        rows = self._step_a_rows(msd_sql.seeds_by_dates(self.dialect, station), params, start_date, end_date)
        seeds = {cid: (name or cid) for cid, name in rows}
        return sorted(seeds.items(), key=lambda r: (r[1], r[0]))

    def detect_by_cids(self, stations, cids: Iterable[str], batch_rows: int = 5000,
                       start_date: str | None = None, end_date: str | None = None) -> Iterator[Batch]:
        """The detection rows of given CIDs: no date bound (container mode), or the window of
        :meth:`detect_by_dates` when both dates are given (the date-mode seeds, chunk by chunk).

        Args:
            stations: as :meth:`detect_by_dates`.
            cids: container ids; stripped and deduplicated; those without a station
                track-in yield nothing.
            start_date, end_date: 'YYYY-MM-DD' window, or None.

        Returns:
            ``(columns, rows)`` batches as :meth:`detect_by_dates`.
        """
        groups = domains.normalize_stations(stations)
        bounds = window(start_date, end_date) if start_date and end_date else None
        return self._detect(groups, sorted(unique_cids(cids)), bounds, batch_rows)

    def resolve_seeds(self, resolve_type: str, values: Iterable[str], stations=None) -> list[tuple[str, str]]:
        """Container-mode seeds: the containers named by ``values`` that passed the station.

        Args:
            resolve_type: lot_id / gd_lot_id (CONTAINERNAME), work_order / gd_work_order
                (MFGORDERNAME) or wafer_lot (FIRSTNAME).
            values: the names typed by the user.
            stations: as :meth:`detect_by_dates`.

        Returns:
            ``[(cid, name)]`` sorted by name then CID.

        Raises:
            InvalidParams: unknown resolve_type, no values or an unknown station.
        """
        column = msd_sql.SEED_COLUMNS.get(resolve_type)
        if column is None:
            raise InvalidParams(f"resolve_type {resolve_type!r} is not one of {', '.join(msd_sql.SEED_COLUMNS)}")
        wanted = _clean(values)
        if not wanted:
            raise InvalidParams("values must not be empty")
        station, params = msd_sql.station_filter(self.dialect, domains.normalize_stations(stations), "h.WORKCENTERNAME")
        found: set[tuple[str, str]] = set()
        for rows in self._in_lists(lambda n: msd_sql.seeds_by_value(self.dialect, column, n, station),
                                   wanted, params):
            found.update(rows)
        return sorted(found, key=lambda r: (r[1] or "", r[0]))

    def resolve_serials(self, values: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
        """Container-mode seeds of ``serial_number`` values, at any station, as the original's
        lot resolver (``_resolve_by_serial_number``, then trace_routes' seed list).

        Each token is looked for in :data:`.msd_sql.SERIAL_SOURCES` (a combined lot's
        FINISHEDNAME, a LOT's CONTAINERNAME, a LOT's FIRSTNAME); a token with ``%``, ``_`` or
        ``*`` is a LIKE pattern. A (token, CID) pair keeps its best source; the seeds are the
        tokens' containers in token order, each token's by (source, name), each CID once.

        Returns:
            ``([(cid, name)], not_found)``: name = CID when the container has none; the tokens
            that matched nothing (and name no seed).

        Raises:
            InvalidParams: no values.
        """
        tokens = _clean(values)
        if not tokens:
            raise InvalidParams("values must not be empty")
        patterns = {t: like_regex(t) for t in tokens}
        exact = [t for t in tokens if patterns[t] is None]
        likes = [t.replace("*", "%") for t in tokens if patterns[t] is not None]
        # A row is looked up among the exact tokens (a set), and matched against the patterns
        # only: 20,000 exact tokens against every row was 43 s.
        exact_set, regexes = set(exact), [(t, r) for t, r in patterns.items() if r is not None]
        best: dict[tuple[str, str], tuple[int, str]] = {}
        for source in range(len(msd_sql.SERIAL_SOURCES)):
            for rows in self._serial_rows(source, exact, likes):
                for cid, value, name in rows:
                    cid, value = str(cid or "").strip(), str(value or "").strip()
                    if not cid or not value:
                        continue
                    matched = [value] if value in exact_set else []
                    matched += [token for token, regex in regexes if regex.fullmatch(value)]
                    for token in matched:
                        kept = best.get((token, cid))
                        if kept is None or source < kept[0]:
                            best[(token, cid)] = (source, str(name or "").strip() or cid)
        by_token: dict[str, list[tuple[int, str, str]]] = {}
        for (token, cid), (source, name) in best.items():
            by_token.setdefault(token, []).append((source, name, cid))
        seeds: dict[str, str] = {}
        for token in tokens:
            for _, name, cid in sorted(by_token.get(token, ())):
                seeds.setdefault(cid, name)
        names = set(seeds.values())
        not_found = [t for t in tokens if t not in by_token and t not in names]
        return list(seeds.items()), not_found

    def _serial_rows(self, source: int, exact: list[str], likes: list[str]) -> Iterator[list[tuple]]:
        for start in range(0, max(len(exact), 1), IN_LIMIT):
            group = exact[start:start + IN_LIMIT]
            if group:
                yield self._rows(msd_sql.serial_candidates(self.dialect, source, len(group), 0),
                                 {f"p{i}": v for i, v in enumerate(group)})
        for start in range(0, len(likes), 100):
            group = likes[start:start + 100]
            yield self._rows(msd_sql.serial_candidates(self.dialect, source, 0, len(group)),
                             {f"q{i}": v for i, v in enumerate(group)})

    def station_options(self) -> list[dict]:
        """``[{name, label, order}]`` of every workcenter group (no query)."""
        return domains.station_options()

    def loss_reasons(self) -> list[str]:
        """Every distinct non-NULL reject reason, sorted."""
        return [r[0] for r in self._rows(msd_sql.loss_reasons(self.dialect), {})]

    def container_filter_options(self, selected: Mapping | None = None) -> dict[str, list[str]]:
        """The type / package / BOP / function options, cross-filtered by ``selected``.

        See :func:`cross_filter`; reads the distinct 4-tuples of the container table.
        """
        return cross_filter(self.container_filter_tuples(), selected)

    def container_filter_tuples(self) -> list[tuple]:
        """The distinct (PJ_TYPE, PRODUCTLINENAME, PJ_BOP, PJ_FUNCTION) of the container table,
        for a caller that caches them and cross-filters with :func:`cross_filter`."""
        return self._rows(msd_sql.filter_tuples(self.dialect), {})
