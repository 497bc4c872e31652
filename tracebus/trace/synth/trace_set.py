"""The trace CID set of a station: seeds that reached it in the window, plus all ancestors.

This is what the original dashboard's seed-resolve and backward lineage steps produce
(DOMAIN.md sections 0 and 5): seeds are the containers whose latest track-in at a
workcenter of the station falls in the window; ancestors follow split parents
(SPLITFROMID, recursively), merge sources (``DW_MES_PJ_COMBINEDASSYLOTS``) and wafer roots
(FIRSTNAME names the root container), to any depth.
"""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict

from tracebus.trace.domains import NO_SEQUENCE, station_group, workcenter_group
from tracebus.trace.synth.clock import WINDOW


def _station_workcenters(conn: sqlite3.Connection, station: str) -> list[str]:
    group = station_group(station)
    names = [r[0] for r in conn.execute(
        "SELECT DISTINCT WORKCENTERNAME FROM DW_MES_LOTWIPHISTORY WHERE WORKCENTERNAME IS NOT NULL")]
    if group.order == NO_SEQUENCE:  # not a known group: plain substring match
        return sorted(n for n in names if station.upper() in n.upper())
    return sorted(n for n in names if workcenter_group(n) == group)


def _seeds(conn: sqlite3.Connection, workcenters: list[str], window: tuple[str, str]) -> list[str]:
    if not workcenters:
        return []
    marks = ",".join("?" * len(workcenters))
    sql = (f"SELECT CONTAINERID, MAX(TRACKINTIMESTAMP) AS LAST_IN FROM DW_MES_LOTWIPHISTORY "
           f"WHERE WORKCENTERNAME IN ({marks}) AND TRACKINTIMESTAMP IS NOT NULL GROUP BY CONTAINERID "
           f"HAVING MAX(TRACKINTIMESTAMP) >= ? AND MAX(TRACKINTIMESTAMP) < ? ORDER BY LAST_IN, CONTAINERID")
    return [r[0] for r in conn.execute(sql, (*workcenters, *window))]


def _parents(conn: sqlite3.Connection) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = defaultdict(list)
    edges = conn.execute(
        "SELECT CONTAINERID, SPLITFROMID FROM DW_MES_CONTAINER WHERE SPLITFROMID IS NOT NULL "
        "UNION ALL SELECT LOTID, CONTAINERID FROM DW_MES_PJ_COMBINEDASSYLOTS "
        "UNION ALL SELECT c.CONTAINERID, w.CONTAINERID FROM DW_MES_CONTAINER c "
        "JOIN DW_MES_CONTAINER w ON w.CONTAINERNAME = c.FIRSTNAME WHERE w.CONTAINERID <> c.CONTAINERID")
    for child, parent in edges:
        parents[child].append(parent)
    return parents


def is_postgres_url(path) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


class _PgReader:
    """The few calls of sqlite3.Connection this module makes, on a read-only psycopg connection."""

    def __init__(self, url: str):
        import psycopg

        self.conn = psycopg.connect(url, connect_timeout=10)
        self.conn.read_only = True

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql.replace("?", "%s"), params)

    def close(self) -> None:
        self.conn.close()


def cids(path: str | os.PathLike, station: str = "TMTT",
         window: tuple[str, str] = WINDOW) -> list[str]:
    """Return the trace CID set of a station: seeds in window order, then their ancestors.

    Args:
        path: the synthetic SQLite database, or the URL of a PostgreSQL database holding the
            sample (``postgresql://...``, as ``tracebus sample-data --to`` writes it).
        station: a workcenter group name or keyword ('TMTT' and '測試' are the same group);
            an unknown name is matched as a substring of workcenter names.
        window: [start, end) ISO timestamps of the latest track-in; default 2025-01-01..05-31.

    Returns:
        Deduplicated CIDs: the seeds ordered by their latest track-in, followed by their
        ancestors in breadth-first order.
    """
    conn = _PgReader(path) if is_postgres_url(path) else sqlite3.connect(f"file:{os.fspath(path)}?mode=ro", uri=True)
    try:
        seeds = _seeds(conn, _station_workcenters(conn, station), window)
        parents = _parents(conn)
    finally:
        conn.close()
    seen = dict.fromkeys(seeds)
    frontier = seeds
    while frontier:
        nxt = []
        for cid in frontier:
            for parent in parents.get(cid, ()):
                if parent not in seen:
                    seen[parent] = None
                    nxt.append(parent)
        frontier = nxt
    return list(seen)
