"""The MSD kind's statements (detection, the backward rows, the page's lookups), written once for
every dialect.

Like :mod:`tracebus.trace.sources.queries`, each builder returns one statement text for a
:class:`~tracebus.trace.sources.queries.Dialect`; CIDs travel as IN lists of bind variables
(``:p0 ..``, at most :data:`~tracebus.trace.sources.batching.IN_LIMIT`), station keywords as
``:k0 ..`` (:func:`~tracebus.trace.sources.queries.station_filter`) and window bounds as
``:t0``/``:t1`` (ISO text, turned into DATEs by the dialect). They follow the original
dashboard's ``sql/mid_section_defect/*.sql``; where they differ it is said next to the
statement. :mod:`.reads` runs them; :func:`statements` lists them for ``tracebus sql``.
"""

from __future__ import annotations

from tracebus.trace import domains
from tracebus.trace.sources.catalog import EXAMPLE_CIDS, EXAMPLE_WINDOW, Statement, example_binds, origin_of
from tracebus.trace.sources.queries import Dialect, in_binds, qty_sum, station_filter


def detection_cids(d: Dialect, station: str) -> str:
    """Step A of date mode (station_detection_cids.sql): the CIDs with a track-in at the
    station in [``:t0``, ``:t1``) whose EQUIPMENTID is set."""
    return (f"SELECT DISTINCT h.CONTAINERID FROM {d.tables['DW_MES_LOTWIPHISTORY']} h "
            f"WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':t0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':t1')} "
            f"AND {station} AND h.EQUIPMENTID IS NOT NULL ORDER BY h.CONTAINERID")


def detection_rows(d: Dialect, n_cids: int, station_h: str, station_r: str, timed: bool, parts: bool = False) -> str:
    """Step B (station_detection_by_ids.sql): the detection rows of one IN list of CIDs.

    The original's shape: MATERIALIZEd CTEs, the CID list bound once (``detection_records``);
    the rejects, the lot metadata and the workflow read ``IN (SELECT CONTAINERID FROM
    detection_deduped)`` (the original binds the list for the rejects too; the final join keeps
    only the deduplicated lots' rows either way). The latest station track-in of each lot
    (ties broken by track-out, then equipment and spec so both dialects pick the same row,
    D4), its TRACKINQTY the largest of that session's partial track-outs, left-joined to the
    station's reject sums per reason (the six quantity columns) and to the lot's metadata and
    workflow. ``timed`` bounds both the track-ins and the rejects to [``:t0``, ``:t1``). The
    original also selects MFGORDERNAME, which MSD.md's column list leaves out. SQLite reads
    the hints as comments.

    ``parts``: the same CTEs, but the statement returns their parts for the caller to join
    (:func:`join_detection_parts`) instead of joining them: SQLite joins the materialized
    rejects or workflow by a scan per lot (no hash join, and it builds an automatic index for
    only one of the two), 7.0M VM steps for a 1,000-seed chunk of the sample against 0.8M.
    """
    t, cids = d.tables, in_binds("p", n_cids)
    h_time = f" AND h.TRACKINTIMESTAMP >= {d.date_bind(':t0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':t1')}"
    r_time = f" AND r.TXNDATE >= {d.date_bind(':t0')} AND r.TXNDATE < {d.date_bind(':t1')}"
    ids = "SELECT CONTAINERID FROM detection_deduped"
    det = ("SELECT /*+ MATERIALIZE */ h.CONTAINERID, h.EQUIPMENTID, h.EQUIPMENTNAME, h.TRACKINTIMESTAMP, "
           "h.FINISHEDRUNCARD, h.SPECNAME, h.WORKCENTERNAME, MAX(h.TRACKINQTY) OVER (PARTITION BY h.CONTAINERID, "
           "h.TRACKINTIMESTAMP, h.EQUIPMENTID) AS ORIG_QTY, ROW_NUMBER() OVER (PARTITION BY h.CONTAINERID "
           "ORDER BY h.TRACKINTIMESTAMP DESC, h.TRACKOUTTIMESTAMP DESC NULLS LAST, h.EQUIPMENTID, h.SPECNAME) AS RN "
           f"FROM {t['DW_MES_LOTWIPHISTORY']} h WHERE h.CONTAINERID IN ({cids}) AND {station_h} "
           f"AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL{h_time if timed else ''}")
    rej = (f"SELECT /*+ MATERIALIZE */ r.CONTAINERID, r.LOSSREASONNAME, SUM({qty_sum('r', with_defect=True)}) "
           f"AS REJECTQTY FROM {t['DW_MES_LOTREJECTHISTORY']} r WHERE r.CONTAINERID IN ({ids}) AND {station_r}"
           f"{r_time if timed else ''} GROUP BY r.CONTAINERID, r.LOSSREASONNAME")
    meta = ("SELECT /*+ MATERIALIZE */ c.CONTAINERID, c.CONTAINERNAME, c.PJ_TYPE, c.PRODUCTLINENAME "
            f"FROM {t['DW_MES_CONTAINER']} c WHERE c.CONTAINERID IN ({ids})")
    # Quirk kept: a WIP row with a NULL PRODUCTLINENAME fails "<> '點測'" and is ignored.
    # DW_MES_WIP (84M rows) has no CONTAINERID index: the original's "w.CONTAINERID IN" reads
    # all of it once per IN list. Its CONTAINERNAME index finds the same rows through the
    # lots' names (a WIP row carries its lot's name, D5), the CONTAINERID test keeps them exact.
    wf = ("SELECT /*+ MATERIALIZE */ CONTAINERID, WORKFLOWNAME FROM (SELECT w.CONTAINERID, w.WORKFLOWNAME, "
          "ROW_NUMBER() OVER (PARTITION BY w.CONTAINERID ORDER BY w.WORKFLOWNAME) AS WF_RN "
          f"FROM {t['DW_MES_WIP']} w WHERE w.CONTAINERNAME IN (SELECT CONTAINERNAME FROM lot_metadata) "
          f"AND w.CONTAINERID IN ({ids}) AND w.PRODUCTLINENAME <> '點測') wfr WHERE WF_RN = 1")
    # SQLite materializes a CTE used twice but then joins it by a scan per row (1,000 x 1,000):
    # there the metadata and workflow stay inline, so the joins search their indexes.
    inline = "NOT MATERIALIZED " if d.name == "sqlite" else ""
    ctes = (f"WITH detection_records AS ({det}), detection_deduped AS (SELECT * FROM detection_records "
            f"WHERE RN = 1), detection_rejects AS ({rej}), lot_metadata AS {inline}({meta}), "
            f"workflow_info AS {inline}({wf}) ")
    if parts:
        pad = ", NULL" * 9
        return (ctes + "SELECT 0 AS PART, t.CONTAINERID, m.CONTAINERNAME, m.PJ_TYPE, m.PRODUCTLINENAME, "
                "t.SPECNAME, t.FINISHEDRUNCARD, t.EQUIPMENTID, t.EQUIPMENTNAME, t.WORKCENTERNAME, t.ORIG_QTY, "
                f"{d.ts('t.TRACKINTIMESTAMP')}, t.TRACKINTIMESTAMP AS SORT_TS "
                "FROM detection_deduped t LEFT JOIN lot_metadata m ON m.CONTAINERID = t.CONTAINERID "
                f"UNION ALL SELECT 1, CONTAINERID, WORKFLOWNAME, NULL{pad} FROM workflow_info "
                f"UNION ALL SELECT 2, CONTAINERID, LOSSREASONNAME, REJECTQTY{pad} FROM detection_rejects "
                "ORDER BY 1, 13, 2")
    return (ctes + "SELECT t.CONTAINERID, m.CONTAINERNAME, m.PJ_TYPE, m.PRODUCTLINENAME, "
            "COALESCE(wf.WORKFLOWNAME, t.SPECNAME) AS WORKFLOW, t.FINISHEDRUNCARD, "
            "t.EQUIPMENTID AS DETECTION_EQUIPMENTID, t.EQUIPMENTNAME AS DETECTION_EQUIPMENTNAME, "
            f"t.WORKCENTERNAME, t.ORIG_QTY AS TRACKINQTY, {d.ts('t.TRACKINTIMESTAMP')} AS TRACKINTIMESTAMP, "
            "r.LOSSREASONNAME, COALESCE(r.REJECTQTY, 0) AS REJECTQTY "
            "FROM detection_deduped t LEFT JOIN lot_metadata m ON m.CONTAINERID = t.CONTAINERID "
            "LEFT JOIN workflow_info wf ON wf.CONTAINERID = t.CONTAINERID "
            "LEFT JOIN detection_rejects r ON r.CONTAINERID = t.CONTAINERID "
            "ORDER BY t.TRACKINTIMESTAMP, t.CONTAINERID, r.LOSSREASONNAME NULLS FIRST")


def _sqlite_order(value):
    """A sort key that orders cells as SQLite's ORDER BY does (NULL, numbers, text, blobs)."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, value) if isinstance(value, str) else (3, value)


def join_detection_parts(rows) -> list[tuple]:
    """The rows of :func:`detection_rows` from the rows of its ``parts`` form: the lots in their
    order, each with its workflow (else its SPECNAME) and one row per reject reason, reasons
    NULL first, or one row with a NULL reason and REJECTQTY 0 when it has none."""
    lots, workflow, rejects = [], {}, {}
    for row in rows:
        if row[0] == 0:
            lots.append(row)
        elif row[0] == 1:
            workflow[row[1]] = row[2]
        else:
            rejects.setdefault(row[1], []).append((row[2], row[3]))
    out = []
    for _, cid, name, pj, pkg, spec, runcard, eq_id, eq_name, wc, qty, stamp, _ in lots:
        wf = workflow.get(cid)
        head = (cid, name, pj, pkg, spec if wf is None else wf, runcard, eq_id, eq_name, wc, qty, stamp)
        found = rejects.get(cid)
        if not found:
            out.append(head + (None, 0))
            continue
        if len(found) > 1:
            found.sort(key=lambda r: _sqlite_order(r[0]))
        out.extend(head + (reason, 0 if reject is None else reject) for reason, reject in found)
    return out


def loss_reasons(d: Dialect) -> str:
    """Every distinct non-NULL reject reason. The original keeps the last 365 days; the
    synthetic data is dated 2025, so no age limit here."""
    return (f"SELECT DISTINCT r.LOSSREASONNAME FROM {d.tables['DW_MES_LOTREJECTHISTORY']} r "
            "WHERE r.LOSSREASONNAME IS NOT NULL ORDER BY r.LOSSREASONNAME")


def filter_tuples(d: Dialect) -> str:
    """The distinct (PJ_TYPE, PRODUCTLINENAME, PJ_BOP, PJ_FUNCTION) of the containers
    (container_filter_cache.py's refresh query)."""
    return ("SELECT DISTINCT TRIM(PJ_TYPE), TRIM(PRODUCTLINENAME), TRIM(PJ_BOP), TRIM(PJ_FUNCTION) "
            f"FROM {d.tables['DW_MES_CONTAINER']} WHERE PJ_TYPE IS NOT NULL AND PRODUCTLINENAME IS NOT NULL "
            "AND PJ_BOP IS NOT NULL")


#: The columns of each domain that the backward aggregation and the detail read (MSD.md §1.1),
#: as :meth:`~.reads.MsdReads.backward_rows` yields them.
BACKWARD_COLUMNS = {
    "upstream_history": ("CONTAINERID", "WORKCENTERNAME", "EQUIPMENTID", "EQUIPMENTNAME"),
    "materials": ("CONTAINERID", "MATERIALPARTNAME", "MATERIALLOTNAME", "MATERIALDESCRIPTION", "EQUIPMENTNAME"),
}


def backward_rows(d: Dialect, domain: str, n_cids: int) -> str:
    """The rows of ``domain`` for one IN list, narrowed to what the backward MSD job reads.

    One row per row of the domain's full statement
    (:func:`~tracebus.trace.sources.queries.select_sql`), so row counts stay the domain's: upstream_history keeps the latest track-in per (CID, workcenter,
    equipment name) and its EQUIPMENTID, materials every row. The workcenter *name* is
    selected, not its group: the group CASE costs more than the rest of the statement in
    SQLite, and the fold maps each distinct name once instead
    (:func:`tracebus.trace.domains.workcenter_group`, the same rule). No ORDER BY: the fold
    reads sets. In SQLite the latest track-in is kept by :class:`~.reads.MsdReads` too: the
    statement returns every track-in with its time, because SQLite's GROUP BY sorts the rows
    in a temporary B-tree that costs it more than one dict update per row costs Python.
    """
    t, cids = d.tables, in_binds("p", n_cids)
    if domain == "materials":
        return (f"SELECT m.CONTAINERID, m.MATERIALPARTNAME, m.MATERIALLOTNAME, m.DESCRIPTION AS MATERIALDESCRIPTION, "
                f"m.EQUIPMENTNAME FROM {t['DW_MES_LOTMATERIALSHISTORY']} m WHERE m.CONTAINERID IN ({cids})")
    if domain != "upstream_history":
        raise ValueError(f"no backward MSD statement for domain {domain!r}")
    where = (f"FROM {t['DW_MES_LOTWIPHISTORY']} h WHERE h.CONTAINERID IN ({cids}) "
             "AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL")
    if d.name == "sqlite":
        return f"SELECT h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTID, h.EQUIPMENTNAME, h.TRACKINTIMESTAMP {where}"
    return ("SELECT CONTAINERID, WORKCENTERNAME, EQUIPMENTID, EQUIPMENTNAME FROM ("
            "SELECT h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTID, h.EQUIPMENTNAME, ROW_NUMBER() OVER "
            "(PARTITION BY h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTNAME ORDER BY h.TRACKINTIMESTAMP DESC) AS RN "
            f"{where}) ranked WHERE RN = 1")


def statements(d: Dialect) -> list[Statement]:
    """Every kind of statement :mod:`.reads` sends in dialect ``d``, for two example CIDs and the
    default station (the MSD kind's part of ``tracebus sql``)."""
    n = len(EXAMPLE_CIDS)
    cids, window = example_binds(EXAMPLE_CIDS), {"t0": EXAMPLE_WINDOW[0], "t1": EXAMPLE_WINDOW[1]}
    groups = domains.normalize_stations(None)
    station_h, k_binds = station_filter(d, groups, "h.WORKCENTERNAME")
    station_r, _ = station_filter(d, groups, "r.WORKCENTERNAME")
    parts = d.name == "sqlite"  # SQLite reads the detection's parts and joins them in Python
    out = [Statement(f"msd.backward_rows.{domain}", backward_rows(d, domain, n), cids, origin_of(backward_rows))
           for domain in BACKWARD_COLUMNS]
    out.append(Statement("msd.detection_cids", detection_cids(d, station_h), k_binds | window,
                         origin_of(detection_cids)))
    for name, timed, binds in (("msd.detection_rows", False, cids | k_binds),
                               ("msd.detection_rows.timed", True, cids | k_binds | window)):
        out.append(Statement(name, detection_rows(d, n, station_h, station_r, timed=timed, parts=parts), binds,
                             origin_of(detection_rows)))
    out.append(Statement("msd.loss_reasons", loss_reasons(d), {}, origin_of(loss_reasons)))
    out.append(Statement("msd.filter_tuples", filter_tuples(d), {}, origin_of(filter_tuples)))
    return out
