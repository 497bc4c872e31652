"""The stage kind's statements: the seed-resolve stage's seeds (by dates, by names, by serial
numbers), written once for every dialect.

Like :mod:`tracebus.trace.sources.queries`, each builder returns one statement text for a
:class:`~tracebus.trace.sources.queries.Dialect`; names travel as IN lists of bind variables
(``:p0 ..``), LIKE patterns as ``:q0 ..``, station keywords as ``:k0 ..``
(:func:`~tracebus.trace.sources.queries.station_filter`) and window bounds as ``:t0``/``:t1``.
They follow the original dashboard's ``sql/mid_section_defect/*.sql`` and the query tool's
lot resolver; where they differ it is said next to the statement. :mod:`.seeds` runs them (the
lineage stage's statements are the shared :mod:`tracebus.trace.sources.lineage_sql`);
:func:`statements` lists them for ``tracebus sql``.
"""

from __future__ import annotations

from tracebus.trace import domains
from tracebus.trace.sources.catalog import (EXAMPLE_CIDS, EXAMPLE_NAMES, EXAMPLE_WINDOW, Statement, example_binds,
                                            origin_of)
from tracebus.trace.sources.queries import Dialect, in_binds, station_filter


def seeds_by_dates(d: Dialect, station: str) -> str:
    """(CID, name) of the date-mode seeds: the MSD kind's step A (``detection_cids``) with the container's name
    (LEFT JOIN: a lot without a container row is still a seed, named by its CID)."""
    return (f"SELECT DISTINCT h.CONTAINERID, c.CONTAINERNAME FROM {d.tables['DW_MES_LOTWIPHISTORY']} h "
            f"LEFT JOIN {d.tables['DW_MES_CONTAINER']} c ON c.CONTAINERID = h.CONTAINERID "
            f"WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':t0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':t1')} "
            f"AND {station} AND h.EQUIPMENTID IS NOT NULL")


#: Container column a container-mode ``resolve_type`` matches (the original's _MSD_SEED_FILTER_COLUMN).
SEED_COLUMNS = {"lot_id": "CONTAINERNAME", "gd_lot_id": "CONTAINERNAME", "work_order": "MFGORDERNAME",
                "gd_work_order": "MFGORDERNAME", "wafer_lot": "FIRSTNAME"}


def seeds_by_value(d: Dialect, column: str, n: int, station: str) -> str:
    """(CID, name) of the containers whose ``column`` is in one IN list and that have a
    track-in with equipment at the station (station_seed_by_filter.sql)."""
    return (f"SELECT DISTINCT h.CONTAINERID, c.CONTAINERNAME FROM {d.tables['DW_MES_LOTWIPHISTORY']} h "
            f"JOIN {d.tables['DW_MES_CONTAINER']} c ON c.CONTAINERID = h.CONTAINERID "
            f"WHERE c.{column} IN ({in_binds('p', n)}) AND {station} "
            "AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL")


#: Where a container-mode ``serial_number`` is looked for, in the original's priority order
#: (query_tool_service._resolve_by_serial_number): (name, value column, statement). The
#: statements select (CID, the matched value, CONTAINERNAME) and take a ``{match}`` predicate.
SERIAL_SOURCES = (
    ("finished_name", "p.FINISHEDNAME",  # lot_resolve_serial.sql
     "SELECT DISTINCT p.CONTAINERID, p.FINISHEDNAME, c.CONTAINERNAME FROM {assy} p "
     "LEFT JOIN {container} c ON p.CONTAINERID = c.CONTAINERID WHERE {match}"),
    ("container_name", "CONTAINERNAME",  # lot_resolve_id.sql
     "SELECT CONTAINERID, CONTAINERNAME, CONTAINERNAME FROM {container} WHERE {match} AND OBJECTTYPE = 'LOT'"),
    ("first_name", "FIRSTNAME",  # lot_resolve_wafer_lot.sql
     "SELECT CONTAINERID, FIRSTNAME, CONTAINERNAME FROM {container} WHERE {match} AND OBJECTTYPE = 'LOT'"),
)


def serial_candidates(d: Dialect, source: int, n_exact: int, n_like: int) -> str:
    """The rows of :data:`SERIAL_SOURCES` ``[source]`` whose value is one of ``:p0 ..`` (exact)
    or LIKE one of ``:q0 ..`` (``\\`` escapes; the caller turned ``*`` into ``%``), as the
    original's ``_add_exact_or_pattern_condition``. SQLite's LIKE ignores ASCII case where
    Oracle's does not: the caller matches the rows again, exactly."""
    _, column, sql = SERIAL_SOURCES[source]
    value = f"COALESCE({column}, '')"
    # The bare column in the IN list, so its index serves it (a NULL is never a typed token).
    terms = [f"{column} IN ({in_binds('p', n_exact)})"] if n_exact else []
    terms += [f"{value} LIKE :q{i} ESCAPE '\\'" for i in range(n_like)]
    return sql.format(assy=d.tables["DW_MES_PJ_COMBINEDASSYLOTS"], container=d.tables["DW_MES_CONTAINER"],
                      match="(" + " OR ".join(terms) + ")")


def statements(d: Dialect) -> list[Statement]:
    """Every kind of statement :mod:`.seeds` sends in dialect ``d``, for two example names and the
    default station (the stage kind's part of ``tracebus sql``; named ``msd.*``, the page's)."""
    n = len(EXAMPLE_CIDS)
    names, window = example_binds(EXAMPLE_NAMES), {"t0": EXAMPLE_WINDOW[0], "t1": EXAMPLE_WINDOW[1]}
    station_h, k_binds = station_filter(d, domains.normalize_stations(None), "h.WORKCENTERNAME")
    out = [Statement("msd.seeds_by_dates", seeds_by_dates(d, station_h), k_binds | window, origin_of(seeds_by_dates))]
    for column in dict.fromkeys(SEED_COLUMNS.values()):
        out.append(Statement(f"msd.seeds_by_value.{column}", seeds_by_value(d, column, n, station_h),
                             names | k_binds, origin_of(seeds_by_value)))
    for i, (source, _, _) in enumerate(SERIAL_SOURCES):
        out.append(Statement(f"msd.serial_candidates.{source}", serial_candidates(d, i, n, 0), names,
                             origin_of(serial_candidates)))
        out.append(Statement(f"msd.serial_candidates.{source}.like", serial_candidates(d, i, 0, 1),
                             {"q0": "GA25011501%"}, origin_of(serial_candidates)))
    return out
