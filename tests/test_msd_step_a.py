"""The MSD detection's step A as the original runs it: 31-day windows over 10 days, 3 at a time.

The original (mid_section_defect_service._resolve_detection_cids with batch_query_engine's
decompose_by_time_range) cuts a range of more than 10 days into closed 31-day windows and
runs their statements three at a time; the union of the windows' CIDs is the seed set of one
statement over the whole range.
"""

from __future__ import annotations

import threading

import pytest

from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources import queries
from tracebus.trace.sources.reads import all_rows
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.sources.windows import PARALLEL, step_a_windows
from tracebus.trace.stages import sql as stages_sql
from tracebus.trace.stages.seeds import SeedReads

WINDOW = ("2025-01-01", "2025-05-31")


class Recording(SqliteSource):
    """Records each step-A statement's window and thread; the first PARALLEL of them wait for
    each other at a barrier, which only passes when they run at the same time."""

    def __init__(self, path):
        super().__init__(path)
        self.runs: list[tuple[str, int]] = []
        self.barrier = threading.Barrier(PARALLEL, timeout=10)

    def _execute(self, sql, params, batch_rows):
        if sql.startswith("SELECT DISTINCT h.CONTAINERID"):  # detection_cids and seeds_by_dates
            self.runs.append((params["t0"], threading.get_ident()))
            if len(self.runs) <= PARALLEL:
                self.barrier.wait()
        yield from super()._execute(sql, params, batch_rows)


def test_windows_follow_the_originals_decomposition():
    # Up to 10 days: one statement over the whole range
    assert step_a_windows("2025-01-01", "2025-01-11") == [("2025-01-01 00:00:00", "2025-01-12 00:00:00")]
    # Over 10 days: closed 31-day windows, the next starting the day after, the last shorter
    assert step_a_windows(*WINDOW) == [
        ("2025-01-01 00:00:00", "2025-02-01 00:00:00"), ("2025-02-01 00:00:00", "2025-03-04 00:00:00"),
        ("2025-03-04 00:00:00", "2025-04-04 00:00:00"), ("2025-04-04 00:00:00", "2025-05-05 00:00:00"),
        ("2025-05-05 00:00:00", "2025-06-01 00:00:00")]
    assert len(step_a_windows("2025-01-01", "2025-01-12")) == 1
    assert step_a_windows("2025-01-01", "2025-02-01")[-1] == ("2025-02-01 00:00:00", "2025-02-02 00:00:00")
    with pytest.raises(InvalidParams):
        step_a_windows("2025-02-01", "2025-01-01")


def test_windowed_seeds_are_the_whole_ranges_seeds_read_three_at_a_time(sample_db):
    # Given the five-month window, read as one statement
    whole = SqliteSource(sample_db)
    station, params = queries.station_filter(whole.dialect, domains.normalize_stations("測試"), "h.WORKCENTERNAME")
    rows = all_rows(whole, stages_sql.seeds_by_dates(whole.dialect, station),
                    params | {"t0": "2025-01-01 00:00:00", "t1": "2025-06-01 00:00:00"})
    expected = sorted({cid: name or cid for cid, name in rows}.items(), key=lambda r: (r[1], r[0]))
    assert len(expected) > 100
    # When the seeds are read as step A does
    src = Recording(sample_db)
    seeds = SeedReads(src).seeds_by_dates("測試", *WINDOW)
    # Then they are the same, from one statement per window, three of them at once
    assert seeds == expected
    assert sorted(t0 for t0, _ in src.runs) == [w[0] for w in step_a_windows(*WINDOW)]
    assert len({thread for _, thread in src.runs}) > 1
    # And the detection's CIDs of the windows are those seeds
    src.runs.clear()
    src.barrier = threading.Barrier(PARALLEL, timeout=10)
    detected = {r[0] for _, batch in MsdReads(src).detect_by_dates("測試", *WINDOW) for r in batch}
    assert detected == {cid for cid, _ in seeds} and len(src.runs) == 5
    whole.close()
    src.close()
