"""Every statement the sources can send, one per kind, with example binds: for review and checks.

:func:`statements` builds each kind from the same builder the source calls (:mod:`.queries`,
:mod:`.msd_sql`), for two example CIDs (or names) and the default station, so the text is the
one a DBA would see on the wire, only the IN lists shorter. ``tracebus sql`` prints them
(``--explain`` runs ``EXPLAIN PLAN`` for each on Oracle), ``tests/test_dwh_schema.py``
qualifies each against the real schema, ``bench source-cost`` reads their access paths.
A statement a source sends that is not listed here fails that test.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Callable

from tracebus.trace import domains
from tracebus.trace.sources import msd_sql
from tracebus.trace.sources.queries import Dialect, builder, jobs_scan_sql, select_sql

#: Example values of the binds: CIDs (16 hex characters, as the DWH's CHAR(16)), names, a window.
EXAMPLE_CIDS = ("48050a1200000001", "48050a1200000002")
EXAMPLE_NAMES = ("GA2501150123-A01", "GA2501150124-A01")
EXAMPLE_WINDOW = ("2025-01-01 00:00:00", "2025-01-11 00:00:00")


@dataclass(frozen=True)
class Statement:
    """One kind of statement: its name, text, example binds and the builder it comes from."""

    name: str
    sql: str
    binds: dict[str, str]
    origin: str  # module:function of the builder

    def to_dict(self) -> dict:
        return {"name": self.name, "sql": self.sql, "binds": self.binds}


def origin_of(func: Callable) -> str:
    """``path.py:line qualname`` of the function that builds a statement."""
    func = inspect.unwrap(func)
    try:
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        line = 0
    return f"{func.__module__.replace('.', '/')}.py:{line} {func.__qualname__}"


def _in(values, prefix: str = "p") -> dict[str, str]:
    return {f"{prefix}{i}": v for i, v in enumerate(values)}


def statements(d: Dialect) -> list[Statement]:
    """Every kind of statement of the sources' reads in dialect ``d``, in a stable order
    (events, MSD, lineage)."""
    n = len(EXAMPLE_CIDS)
    cids, names = _in(EXAMPLE_CIDS), _in(EXAMPLE_NAMES)
    window = {"t0": EXAMPLE_WINDOW[0], "t1": EXAMPLE_WINDOW[1]}
    groups = domains.normalize_stations(None)
    station_h, k_binds = msd_sql.station_filter(d, groups, "h.WORKCENTERNAME")
    station_r, _ = msd_sql.station_filter(d, groups, "r.WORKCENTERNAME")
    out = [Statement(f"events.{domain}", select_sql(d, domain, n), cids, origin_of(builder(domain)))
           for domain in domains.DOMAINS]

    def add(name: str, build: Callable, sql: str, binds: dict) -> None:
        out.append(Statement(name, sql, binds, origin_of(build)))

    add("events.jobs.scan", jobs_scan_sql, jobs_scan_sql(d), {})

    for domain in msd_sql.BACKWARD_COLUMNS:
        add(f"msd.backward_rows.{domain}", msd_sql.backward_rows, msd_sql.backward_rows(d, domain, n), cids)
    add("msd.detection_cids", msd_sql.detection_cids, msd_sql.detection_cids(d, station_h), k_binds | window)
    add("msd.seeds_by_dates", msd_sql.seeds_by_dates, msd_sql.seeds_by_dates(d, station_h), k_binds | window)
    parts = d.name == "sqlite"  # SQLite reads the detection's parts and joins them in Python
    add("msd.detection_rows", msd_sql.detection_rows,
        msd_sql.detection_rows(d, n, station_h, station_r, timed=False, parts=parts), cids | k_binds)
    add("msd.detection_rows.timed", msd_sql.detection_rows,
        msd_sql.detection_rows(d, n, station_h, station_r, timed=True, parts=parts), cids | k_binds | window)
    for column in dict.fromkeys(msd_sql.SEED_COLUMNS.values()):
        add(f"msd.seeds_by_value.{column}", msd_sql.seeds_by_value,
            msd_sql.seeds_by_value(d, column, n, station_h), names | k_binds)
    for i, (source, _, _) in enumerate(msd_sql.SERIAL_SOURCES):
        add(f"msd.serial_candidates.{source}", msd_sql.serial_candidates,
            msd_sql.serial_candidates(d, i, n, 0), names)
        add(f"msd.serial_candidates.{source}.like", msd_sql.serial_candidates,
            msd_sql.serial_candidates(d, i, 0, 1), {"q0": "GA25011501%"})
    add("msd.loss_reasons", msd_sql.loss_reasons, msd_sql.loss_reasons(d), {})
    add("msd.filter_tuples", msd_sql.filter_tuples, msd_sql.filter_tuples(d), {})
    for name, build, binds in (("snapshot", msd_sql.snapshot, cids), ("ids_by_name", msd_sql.ids_by_name, names),
                                 ("leaf_serials", msd_sql.leaf_serials, cids)):
        add(f"lineage.{name}", build, build(d, n), binds)
    add("lineage.merge_sources.wide", msd_sql.merge_sources_wide, msd_sql.merge_sources_wide(d, n),
        cids if d.name == "oracle" else {"ids": json.dumps(list(EXAMPLE_CIDS))})
    add("lineage.merge_sources.up", msd_sql.merge_sources_up, msd_sql.merge_sources_up(d, n, 19),
        cids if d.name == "oracle" else {})
    add("lineage.descendant_edges", msd_sql.descendant_edges, msd_sql.descendant_edges(d, n, 20),
        cids if d.name == "oracle" else {})
    add("lineage.split_descendants", msd_sql.split_descendants, msd_sql.split_descendants(d, n, 19),
        cids if d.name == "oracle" else {})
    return out
