"""The lineage statements (container snapshots, names, split and merge edges, leaf serials),
written once for every dialect.

Shared by the kinds that walk lineage (the MSD kind's events stage, the stage kind's lineage
and query-tool trees) through :mod:`.lineage` and the trees. Like :mod:`.queries`, each builder
returns one statement text for a :class:`~.queries.Dialect`; CIDs and names travel as IN lists
of bind variables (``:p0 ..``, at most :data:`~.batching.IN_LIMIT`). They follow the original
dashboard's ``sql/lineage/*.sql``; where they differ it is said next to the statement.
"""

from __future__ import annotations

from tracebus.trace.sources.queries import Dialect, in_any, in_binds

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
