"""Date ranges of the MSD page's statements: their bounds, and step A's reads in windows.

Shared by the kinds that read seeds by date (the stage kind's seed-resolve, the MSD kind's
date-mode detection). As the original (mid_section_defect_service._resolve_detection_cids): a
range of more than :data:`SPLIT_OVER_DAYS` days (BATCH_QUERY_TIME_THRESHOLD_DAYS) is read in
windows of :data:`WINDOW_DAYS` days (batch_query_engine.decompose_by_time_range),
:data:`PARALLEL` at a time (MSD_ENGINE_PARALLEL), so no one statement spans a long range.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta

from tracebus.errors import InvalidParams
from tracebus.trace.sources.reads import Reader, all_rows

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


def step_a_rows(source: Reader, sql: str, params: dict, start_date: str, end_date: str) -> list[tuple]:
    """The rows of a step-A statement over a date range: one statement per window of
    :func:`step_a_windows` (bound as ``:t0``/``:t1``), :data:`PARALLEL` at a time (a source runs
    a statement from another thread on a connection of that thread). A failed window fails the
    read; the original drops it and flags the answer partial."""
    bounds = step_a_windows(start_date, end_date)
    binds = [params | {"t0": t0, "t1": t1} for t0, t1 in bounds]
    if len(binds) == 1:
        return all_rows(source, sql, binds[0])
    with ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="step-a") as pool:
        return [row for rows in pool.map(lambda b: all_rows(source, sql, b), binds) for row in rows]
