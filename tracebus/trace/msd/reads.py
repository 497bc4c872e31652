"""The MSD kind's reads: detection rows, the backward job's rows and the page's lookups.

:class:`MsdReads` runs on any source (a :class:`~tracebus.trace.sources.reads.Reader`: its
``dialect`` and ``execute``), so the SQLite, PostgreSQL and Oracle sources share it and none of
them knows it. The statements are in :mod:`.sql`. Detection rows come in ``(columns, rows)``
batches like :meth:`~tracebus.trace.sources.base.EventSource.fetch`, one IN list
(≤ :data:`~tracebus.trace.sources.batching.IN_LIMIT` CIDs) at a time, never all at once. The
seeds (the stage kind's seed-resolve) and the lineage (:mod:`tracebus.trace.sources.lineage`)
are read elsewhere.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.msd import sql as msd_sql
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.sources.batching import Batch, in_lists, unique_cids, unique_texts
from tracebus.trace.sources.queries import station_filter
from tracebus.trace.sources.reads import Reads
from tracebus.trace.sources.windows import step_a_rows, window

#: The keys of a cross-filter selection, each a list of strings.
FILTER_KEYS = ("pj_types", "packages", "bops", "pj_functions")
_FILTER_KEYS = FILTER_KEYS


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
    chosen = [set(unique_texts((selected or {}).get(key))) & set(full[i]) for i, key in enumerate(_FILTER_KEYS)]
    if not any(chosen):
        return dict(zip(_FILTER_KEYS, full))
    out = {}
    for i, key in enumerate(_FILTER_KEYS):
        keep = [r for r in rows if all(not chosen[j] or r[j] in chosen[j] for j in range(4) if j != i)]
        out[key] = sorted({r[i] for r in keep if r[i]})
    return out


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


class MsdReads(Reads):
    """The MSD page's reads over a source: ``MsdReads(source).detect_by_cids(...)``."""

    def backward_rows(self, domain: str, cids: list[str], batch_rows: int) -> Iterator[Batch]:
        """The rows of ``domain`` (upstream_history or materials) for ``cids``, narrowed to the
        columns the backward MSD job reads (:data:`.sql.BACKWARD_COLUMNS`), in batches.

        The same rows as :meth:`~tracebus.trace.sources.base.EventSource.fetch` projected on those
        columns, the same number of them, in no particular order: the job folds them into sets and
        needs neither the other columns nor the order, and the full statements cost several times
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

    def _detect(self, groups, cids: list[str], bounds, batch_rows: int) -> Iterator[Batch]:
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise InvalidParams(f"batch_rows must be a positive integer, got {batch_rows!r}")
        return self._detect_rows(groups, cids, bounds, batch_rows)

    def _detect_rows(self, groups, cids: list[str], bounds, batch_rows: int) -> Iterator[Batch]:
        h_filter, params = station_filter(self.dialect, groups, "h.WORKCENTERNAME")
        r_filter, _ = station_filter(self.dialect, groups, "r.WORKCENTERNAME")
        if bounds:
            params |= {"t0": bounds[0], "t1": bounds[1]}
        cols = list(DETECTION_COLUMNS)
        joined_here = self.dialect.name == "sqlite"  # see sql.detection_rows' ``parts``
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
            An iterator of ``(columns, rows)`` with ``columns`` = :data:`.detection.DETECTION_COLUMNS`,
            one IN list of seeds (in CID order) after another.

        Raises:
            InvalidParams: bad dates or an unknown station, at once.
            SourceError: while iterating, when the database fails.
        """
        bounds = window(start_date, end_date)
        groups = domains.normalize_stations(stations)
        station, params = station_filter(self.dialect, groups, "h.WORKCENTERNAME")
        self._detect(groups, [], bounds, batch_rows)  # validates batch_rows now, not when iterated

        def run():
            sql = msd_sql.detection_cids(self.dialect, station)
            cids = sorted({r[0] for r in step_a_rows(self.source, sql, params, start_date, end_date)})
            yield from self._detect_rows(groups, cids, bounds, batch_rows)

        return run()

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

