"""The stage kind's reads: the seed-resolve stage's seeds (MSD.md section 7).

:class:`SeedReads` runs on any source (a :class:`~tracebus.trace.sources.reads.Reader`: its
``dialect`` and ``execute``): the date-mode seeds, read in step A's windows
(:mod:`tracebus.trace.sources.windows`), and the container-mode seeds by name, work order, wafer
lot or serial number. The statements are in :mod:`.sql`. The lineage stage reads
:mod:`tracebus.trace.sources.lineage` and :mod:`.trees`.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.sources.batching import IN_LIMIT, in_lists, unique_texts
from tracebus.trace.sources.queries import station_filter
from tracebus.trace.sources.reads import Reads
from tracebus.trace.sources.windows import step_a_rows, window
from tracebus.trace.stages import sql as stages_sql


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


class SeedReads(Reads):
    """The seed-resolve stage's reads over a source: ``SeedReads(source).seeds_by_dates(...)``."""

    def _in_lists(self, sql_for, values: list[str], extra: dict | None = None) -> Iterator[list[tuple]]:
        """Run ``sql_for(n)`` once per IN list of ``values``; yield each list's rows."""
        for group, params in in_lists(values):
            yield self._rows(sql_for(len(group)), params | (extra or {}))

    def seeds_by_dates(self, stations, start_date: str, end_date: str) -> list[tuple[str, str]]:
        """The seeds of a date range, as the MSD kind's date-mode detection picks them (its step A),
        without their rows: the lots with a track-in at a workcenter of ``stations`` within
        [start_date, end_date] whose EQUIPMENTID is set.

        Cheaper than the detection: one statement per step-A window
        (:func:`~tracebus.trace.sources.windows.step_a_windows`), no per-seed rejects (the
        seed-resolve stage needs only the seed set).

        Args:
            stations: ``"g1,g2"`` or a list of group names or keywords; empty means 測試.
            start_date, end_date: 'YYYY-MM-DD', both included.

        Returns:
            ``[(cid, name)]`` sorted by name then CID (name = CID when the lot has none).

        Raises:
            InvalidParams: bad dates or an unknown station.
        """
        window(start_date, end_date)  # bad dates are a 400 before the station is looked at
        station, params = station_filter(self.dialect, domains.normalize_stations(stations), "h.WORKCENTERNAME")
        rows = step_a_rows(self.source, stages_sql.seeds_by_dates(self.dialect, station), params,
                           start_date, end_date)
        seeds = {cid: (name or cid) for cid, name in rows}
        return sorted(seeds.items(), key=lambda r: (r[1], r[0]))

    def resolve_seeds(self, resolve_type: str, values: Iterable[str], stations=None) -> list[tuple[str, str]]:
        """Container-mode seeds: the containers named by ``values`` that passed the station.

        Args:
            resolve_type: lot_id / gd_lot_id (CONTAINERNAME), work_order / gd_work_order
                (MFGORDERNAME) or wafer_lot (FIRSTNAME).
            values: the names typed by the user.
            stations: as :meth:`seeds_by_dates`.

        Returns:
            ``[(cid, name)]`` sorted by name then CID.

        Raises:
            InvalidParams: unknown resolve_type, no values or an unknown station.
        """
        column = stages_sql.SEED_COLUMNS.get(resolve_type)
        if column is None:
            raise InvalidParams(f"resolve_type {resolve_type!r} is not one of {', '.join(stages_sql.SEED_COLUMNS)}")
        wanted = unique_texts(values)
        if not wanted:
            raise InvalidParams("values must not be empty")
        station, params = station_filter(self.dialect, domains.normalize_stations(stations), "h.WORKCENTERNAME")
        found: set[tuple[str, str]] = set()
        for rows in self._in_lists(lambda n: stages_sql.seeds_by_value(self.dialect, column, n, station),
                                   wanted, params):
            found.update(rows)
        return sorted(found, key=lambda r: (r[1] or "", r[0]))

    def resolve_serials(self, values: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
        """Container-mode seeds of ``serial_number`` values, at any station, as the original's
        lot resolver (``_resolve_by_serial_number``, then trace_routes' seed list).

        Each token is looked for in :data:`.sql.SERIAL_SOURCES` (a combined lot's
        FINISHEDNAME, a LOT's CONTAINERNAME, a LOT's FIRSTNAME); a token with ``%``, ``_`` or
        ``*`` is a LIKE pattern. A (token, CID) pair keeps its best source; the seeds are the
        tokens' containers in token order, each token's by (source, name), each CID once.

        Returns:
            ``([(cid, name)], not_found)``: name = CID when the container has none; the tokens
            that matched nothing (and name no seed).

        Raises:
            InvalidParams: no values.
        """
        tokens = unique_texts(values)
        if not tokens:
            raise InvalidParams("values must not be empty")
        patterns = {t: like_regex(t) for t in tokens}
        exact = [t for t in tokens if patterns[t] is None]
        likes = [t.replace("*", "%") for t in tokens if patterns[t] is not None]
        # A row is looked up among the exact tokens (a set), and matched against the patterns
        # only: 20,000 exact tokens against every row was 43 s.
        exact_set, regexes = set(exact), [(t, r) for t, r in patterns.items() if r is not None]
        best: dict[tuple[str, str], tuple[int, str]] = {}
        for source in range(len(stages_sql.SERIAL_SOURCES)):
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
        return _serial_seeds(tokens, best)

    def _serial_rows(self, source: int, exact: list[str], likes: list[str]) -> Iterator[list[tuple]]:
        for start in range(0, max(len(exact), 1), IN_LIMIT):
            group = exact[start:start + IN_LIMIT]
            if group:
                yield self._rows(stages_sql.serial_candidates(self.dialect, source, len(group), 0),
                                 {f"p{i}": v for i, v in enumerate(group)})
        for start in range(0, len(likes), 100):
            group = likes[start:start + 100]
            yield self._rows(stages_sql.serial_candidates(self.dialect, source, 0, len(group)),
                             {f"q{i}": v for i, v in enumerate(group)})


def _serial_seeds(tokens: list[str],
                  best: dict[tuple[str, str], tuple[int, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """:meth:`SeedReads.resolve_serials`' answer from each (token, CID) pair's best (source,
    name): the tokens' containers in token order, each token's by (source, name), each CID
    once; and the tokens that matched nothing and name no seed."""
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
