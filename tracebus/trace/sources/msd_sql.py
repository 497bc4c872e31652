"""The MSD statements (detection, lineage, seed and filter lookups), written once for both dialects.

Like :mod:`.queries`, each builder returns one statement text for a :class:`~.queries.Dialect`;
CIDs and names travel as IN lists of bind variables (``:p0 ..``, at most
:data:`~.base.IN_LIMIT`), station keywords as ``:k0 ..`` and window bounds as ``:t0``/``:t1``
(ISO text, turned into DATEs by the dialect). They follow the original dashboard's
``sql/mid_section_defect/*.sql`` and ``sql/lineage/*.sql``; where they differ it is said
next to the statement.
"""

from __future__ import annotations

from tracebus.trace.domains import WorkcenterGroup
from tracebus.trace.sources.queries import Dialect, in_any, in_binds, in_group, qty_sum


def station_filter(d: Dialect, groups: list[WorkcenterGroup], column: str) -> tuple[str, dict[str, str]]:
    """SQL predicate "``column`` belongs to one of ``groups``" and its ``:k`` binds.

    The test of :func:`.queries.in_group` (the group CASE's), with the keywords bound. The
    original uses ``LIKE '%pattern%'``, where the ``_`` of '焊接_DB' is a wildcard; INSTR
    keeps it a plain character.
    """
    params: dict[str, str] = {}

    def bind(word: str) -> str:
        name = f"k{len(params)}"
        params[name] = word
        return ":" + name

    return "(" + " OR ".join(f"({in_group(d, group, column, bind)})" for group in groups) + ")", params


def detection_cids(d: Dialect, station: str) -> str:
    """Step A of date mode (station_detection_cids.sql): the CIDs with a track-in at the
    station in [``:t0``, ``:t1``) whose EQUIPMENTID is set."""
    return (f"SELECT DISTINCT h.CONTAINERID FROM {d.tables['DW_MES_LOTWIPHISTORY']} h "
            f"WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':t0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':t1')} "
            f"AND {station} AND h.EQUIPMENTID IS NOT NULL ORDER BY h.CONTAINERID")


def seeds_by_dates(d: Dialect, station: str) -> str:
    """(CID, name) of the date-mode seeds: :func:`detection_cids` with the container's name
    (LEFT JOIN: a lot without a container row is still a seed, named by its CID)."""
    return (f"SELECT DISTINCT h.CONTAINERID, c.CONTAINERNAME FROM {d.tables['DW_MES_LOTWIPHISTORY']} h "
            f"LEFT JOIN {d.tables['DW_MES_CONTAINER']} c ON c.CONTAINERID = h.CONTAINERID "
            f"WHERE h.TRACKINTIMESTAMP >= {d.date_bind(':t0')} AND h.TRACKINTIMESTAMP < {d.date_bind(':t1')} "
            f"AND {station} AND h.EQUIPMENTID IS NOT NULL")


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


#: Container columns the lineage reads (lineage/container_snapshot.sql).
SNAPSHOT_COLUMNS = ("CONTAINERID", "CONTAINERNAME", "MFGORDERNAME", "OBJECTTYPE", "FIRSTNAME",
                    "ORIGINALCONTAINERID", "SPLITFROMID")


def snapshot(d: Dialect, n: int) -> str:
    """The :data:`SNAPSHOT_COLUMNS` of the containers in one IN list."""
    return (f"SELECT {', '.join('c.' + c for c in SNAPSHOT_COLUMNS)} FROM {d.tables['DW_MES_CONTAINER']} c "
            f"WHERE c.CONTAINERID IN ({in_binds('p', n)})")


def ids_by_name(d: Dialect, n: int) -> str:
    """(CONTAINERID, CONTAINERNAME) of LOT containers named in one IN list (lot_ids_by_name.sql)."""
    return (f"SELECT c.CONTAINERID, c.CONTAINERNAME FROM {d.tables['DW_MES_CONTAINER']} c "
            f"WHERE c.OBJECTTYPE = 'LOT' AND c.CONTAINERNAME IN ({in_binds('p', n)})")


def merge_sources_wide(d: Dialect, n: int) -> str:
    """(target, source, source name) merge edges into up to ``max_binds`` targets, in one
    statement (merge_sources.sql, which takes one IN list of 1,000).

    LOTID has no index: each statement reads all of DW_MES_PJ_COMBINEDASSYLOTS (2M rows), so
    the backward walk sends one per level, where the original sends one per 1,000 targets.
    Oracle takes IN lists of 1,000 OR-ed (``:p0 ..``); SQLite one JSON array bound as
    ``:ids`` (its IN over thousands of binds tests them one by one: 1.1 s for 7K targets,
    0.04 s through json_each).
    """
    if d.name == "oracle":
        match = in_any(d, "ca.LOTID", n)
    elif d.name == "postgres":  # the same JSON array as SQLite's, unnested on the server
        match = "ca.LOTID IN (SELECT JSON_ARRAY_ELEMENTS_TEXT(CAST(:ids AS json)))"
    else:
        match = "ca.LOTID IN (SELECT j.value FROM json_each(:ids) AS j)"
    return (f"SELECT ca.LOTID, ca.CONTAINERID, ca.CONTAINERNAME FROM {d.tables['DW_MES_PJ_COMBINEDASSYLOTS']} ca "
            f"WHERE {match}")


def merge_sources_up(d: Dialect, n: int, depth: int) -> str:
    """(target, source, source name) of every merge edge into a lot the ascending walk can reach
    from the seeds ``:p0 ..`` within ``depth`` levels, in one statement (merge_sources.sql,
    which takes one IN list of 1,000 targets and is sent once per IN list per level).

    LOTID has no index: each statement that looks targets up reads all of
    DW_MES_PJ_COMBINEDASSYLOTS (2M rows), so the backward walk reads the merge edges of all its
    levels at once and picks each level's rows from them. Oracle returns the merge rows whose
    target is a seed or a lot ``CONNECT BY NOCYCLE`` reaches up from the seeds in at most
    ``depth`` levels (a shortest path to a lot repeats no lot, so NOCYCLE never cuts it) (any number of seeds up to the bind limit, IN lists of 1,000 OR-ed) over
    a superset of the walk's links: split parent (SPLITFROMID), merge source, every LOT named
    by the FIRSTNAME (the walk keeps the smallest CID) and ORIGINALCONTAINERID (the walk's GD
    rework link, for GD lots only); the superset reaches every lot the walk reaches within the
    depth, and the caller keeps only the rows of each level's targets, so each merge row once,
    as the per-level statement returns it. The links from DW_MES_CONTAINER follow CONTAINERID
    and CONTAINERNAME, both indexed; DW_MES_PJ_COMBINEDASSYLOTS is read once, into a
    MATERIALIZEd CTE (its 2M merge rows, three columns, in Oracle's temporary space) that both
    the walk and the answer read. SQLite returns every merge edge (``n`` and ``depth``
    unused; the embedded table is small, and a recursive CTE probing an unindexed LOTID scans
    the table once per reached lot), as :func:`descendant_edges`.
    """
    t = d.tables
    merges = (f"SELECT ca.LOTID, ca.CONTAINERID, ca.CONTAINERNAME FROM {t['DW_MES_PJ_COMBINEDASSYLOTS']} ca "
              "WHERE ca.LOTID IS NOT NULL")
    if d.name != "oracle":
        return merges
    links = (f"SELECT c.CONTAINERID AS CHILD, c.SPLITFROMID AS PARENT FROM {t['DW_MES_CONTAINER']} c "
             "WHERE c.SPLITFROMID IS NOT NULL "
             f"UNION ALL SELECT c.CONTAINERID AS CHILD, c.ORIGINALCONTAINERID AS PARENT FROM {t['DW_MES_CONTAINER']} c "
             "WHERE c.ORIGINALCONTAINERID IS NOT NULL "
             "UNION ALL SELECT me.LOTID AS CHILD, me.CONTAINERID AS PARENT FROM merge_edges me "
             f"UNION ALL SELECT c.CONTAINERID AS CHILD, w.CONTAINERID AS PARENT FROM {t['DW_MES_CONTAINER']} c "
             f"JOIN {t['DW_MES_CONTAINER']} w ON w.CONTAINERNAME = c.FIRSTNAME AND w.OBJECTTYPE = 'LOT'")
    # The merge edges are read once (MATERIALIZE), for the walk and for the answer. A seed with
    # merge rows is the CHILD of a START WITH row (its merge links), a lot reached within the
    # depth the PARENT of a row: the seeds are bound once. The START WITH rows are level 1
    # whatever the limit: at depth 0 (the seeds' own merges) the same statement.
    return (f"WITH merge_edges AS ({merges.replace('SELECT ', 'SELECT /*+ MATERIALIZE */ ', 1)}), "
            f"reach AS (SELECT /*+ MATERIALIZE */ e.CHILD, e.PARENT FROM ({links}) e "
            f"START WITH {in_any(d, 'e.CHILD', n)} CONNECT BY NOCYCLE PRIOR e.PARENT = e.CHILD "
            f"AND LEVEL <= {max(int(depth), 1)}) SELECT me.LOTID, me.CONTAINERID, me.CONTAINERNAME "
            "FROM merge_edges me WHERE me.LOTID IN (SELECT r.CHILD FROM reach r) "
            "OR me.LOTID IN (SELECT r.PARENT FROM reach r)")


def descendant_edges(d: Dialect, n: int, depth: int) -> str:
    """(parent, child, edge type) of the split and merge edges of the descending walk, in one
    statement.

    DW_MES_CONTAINER has no SPLITFROMID index, so each statement that looks for split children
    reads all of it (5.3M rows). The original walks the splits with one CONNECT BY per IN list
    of roots (split_descendants.sql) and its merges per IN list apart; here splits and merge
    targets (DW_MES_PJ_COMBINEDASSYLOTS, source CONTAINERID -> target LOTID) are one edge set
    read once per request. Oracle walks it from the parents ``:p0 ..`` (any number up to the
    bind limit, IN lists of 1,000 OR-ed) with ``CONNECT BY NOCYCLE ... LEVEL <= depth`` and
    returns the reachable edges only. SQLite returns every edge (``n`` and ``depth`` unused):
    the embedded tables are small, and its recursive CTE over them rebuilt the join's
    automatic index at every step (51 s for 36K seeds at scale 1); the caller walks them.
    """
    t = d.tables
    splits = (f"SELECT c.SPLITFROMID AS PARENT, c.CONTAINERID AS CHILD, 'split_from' AS KIND "
              f"FROM {t['DW_MES_CONTAINER']} c WHERE c.SPLITFROMID IS NOT NULL")
    merges = (f"SELECT ca.CONTAINERID AS PARENT, ca.LOTID AS CHILD, 'merge_source' AS KIND "
              f"FROM {t['DW_MES_PJ_COMBINEDASSYLOTS']} ca WHERE ca.LOTID IS NOT NULL")
    if d.name == "oracle":
        return (f"SELECT DISTINCT e.PARENT, e.CHILD, e.KIND FROM ({splits} UNION ALL {merges}) e "
                f"START WITH {in_any(d, 'e.PARENT', n)} CONNECT BY NOCYCLE PRIOR e.CHILD = e.PARENT "
                f"AND LEVEL <= {int(depth)}")
    return f"{splits} UNION ALL {merges}"


def split_descendants(d: Dialect, n: int, depth: int) -> str:
    """(parent, child, child name) of the split edges below the parents ``:p0 ..``, in one
    statement (split_descendants.sql, the query-tool trees' descent).

    DW_MES_CONTAINER has no SPLITFROMID index: a statement per level (``SPLITFROMID IN (..)``)
    reads all of it per level and IN list. Oracle walks the splits from the parents (any
    number up to the bind limit, IN lists of 1,000 OR-ed) with ``CONNECT BY NOCYCLE ...
    LEVEL <= depth``, the level-1 rows being the parents' own children; SQLite returns every
    split edge (``n`` and ``depth`` unused; the embedded table is small) and the caller walks
    them, as :func:`descendant_edges`.
    """
    cols = (f"SELECT DISTINCT c.SPLITFROMID, c.CONTAINERID, c.CONTAINERNAME "
            f"FROM {d.tables['DW_MES_CONTAINER']} c")
    if d.name == "oracle":
        return (f"{cols} START WITH {in_any(d, 'c.SPLITFROMID', n)} "
                f"CONNECT BY NOCYCLE PRIOR c.CONTAINERID = c.SPLITFROMID AND LEVEL <= {int(depth)}")
    return f"{cols} WHERE c.SPLITFROMID IS NOT NULL"


def leaf_serials(d: Dialect, n: int) -> str:
    """(CID, FINISHEDNAME) of the CIDs of one IN list (leaf_serial_numbers.sql)."""
    return (f"SELECT DISTINCT ca.CONTAINERID, ca.FINISHEDNAME FROM {d.tables['DW_MES_PJ_COMBINEDASSYLOTS']} ca "
            f"WHERE ca.CONTAINERID IN ({in_binds('p', n)}) AND ca.FINISHEDNAME IS NOT NULL")


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
#: as :meth:`~.msd.MsdReads.backward_rows` yields them.
BACKWARD_COLUMNS = {
    "upstream_history": ("CONTAINERID", "WORKCENTERNAME", "EQUIPMENTID", "EQUIPMENTNAME"),
    "materials": ("CONTAINERID", "MATERIALPARTNAME", "MATERIALLOTNAME", "MATERIALDESCRIPTION", "EQUIPMENTNAME"),
}


def backward_rows(d: Dialect, domain: str, n_cids: int) -> str:
    """The rows of ``domain`` for one IN list, narrowed to what the backward MSD job reads.

    One row per row of the domain's full statement (:func:`.queries.select_sql`), so row counts
    stay the domain's: upstream_history keeps the latest track-in per (CID, workcenter,
    equipment name) and its EQUIPMENTID, materials every row. The workcenter *name* is
    selected, not its group: the group CASE costs more than the rest of the statement in
    SQLite, and the fold maps each distinct name once instead
    (:func:`tracebus.trace.domains.workcenter_group`, the same rule). No ORDER BY: the fold
    reads sets. In SQLite the latest track-in is kept by :class:`~.msd.MsdReads` too: the
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
