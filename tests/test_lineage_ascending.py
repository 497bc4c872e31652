"""The ascending lineage walk reads its merge sources once per request, with the rows it read per level.

:meth:`~tracebus.trace.sources.lineage.LineageReads.lineage_backward` used to send
``merge_sources_wide`` (merge_sources.sql: ``LOTID IN (..)``, a full scan of
DW_MES_PJ_COMBINEDASSYLOTS) once per level; it now reads the merge edges of every level in one
statement (``merge_sources_up``). :func:`per_level_backward` below is the walk as it was, kept
as the reference (its own merge reads per level; the linking of a level is the walk's own
:meth:`~tracebus.trace.sources.lineage.LineageReads._link_level`, which this test does not
change): both run on the sample database for many seed sets and depths and must give
the same lineage, field by field and in the same order. The Oracle statement's links (the
superset of the walk's links it follows up with CONNECT BY) are run on SQLite too, through a
recursive CTE, to show that they reach every level's targets.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections import defaultdict
from dataclasses import asdict

import pytest

from tracebus.trace.sources import lineage_sql
from tracebus.trace.sources.batching import unique_cids
from tracebus.trace.sources.genealogy import BackwardLineage, close_ancestors
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.lineage import _FIRST, _NAME
from tracebus.trace.sources.queries import ORACLE, SQLITE
from tracebus.trace.sources.sqlite import SqliteSource


def per_level_backward(src, seed_cids, max_depth: int = 20) -> BackwardLineage:
    """The ascending walk before one statement per request: merge sources per level."""
    src = LineageReads(src)
    out = BackwardLineage(seeds=unique_cids(seed_cids))
    wafers: dict = {}
    seen_edges: set = set()
    merge_names: dict[str, str] = {}
    frontier, seen = list(out.seeds), set(out.seeds)
    for _ in range(max_depth):
        if not frontier:
            break
        snaps = src._snapshots(frontier)
        out.snaps.update(snaps)
        merges = _level_merges(src, frontier, merge_names)
        src._wafers({s[_FIRST] for s in snaps.values()}, wafers)
        frontier = src._link_level(out, frontier, snaps, merges, wafers, seen_edges, seen)
    out.snaps.update(src._snapshots(frontier))
    out.names = {c: s[_NAME] for c, s in out.snaps.items() if s[_NAME]}
    for cid, name in merge_names.items():
        out.names.setdefault(cid, name)
    close_ancestors(out)
    return out


def _level_merges(src: LineageReads, frontier: list[str], merge_names: dict[str, str]) -> dict[str, list[str]]:
    """One level's merge sources per target lot: merge_sources_wide, one statement per level
    (what the new walk no longer does); each source's first name goes into ``merge_names``."""
    merges: dict[str, list[str]] = defaultdict(list)
    for target, source, name in src._each(lineage_sql.merge_sources_wide, frontier, wide=True):
        merges[target].append(source)
        if name:
            merge_names.setdefault(source, name)
    return merges


class Counting(SqliteSource):
    """The SQLite source, counting the statements that read DW_MES_PJ_COMBINEDASSYLOTS by LOTID."""

    def __init__(self, path):
        super().__init__(path)
        self.merge_reads = 0

    def _execute(self, sql, params, batch_rows):
        if "ca.LOTID" in sql and "FROM DW_MES_PJ_COMBINEDASSYLOTS ca" in sql:
            self.merge_reads += 1
        return super()._execute(sql, params, batch_rows)


def oracle_reach_on_sqlite(n: int, depth: int) -> str:
    """The lots the Oracle statement looks merges up for, on SQLite: its link set and depth, as
    it builds them (table names without the owner), walked by a recursive CTE for its CONNECT BY
    (level 0 the seeds, bound as the JSON array ``:ids``): the CHILD of every link row of a
    level under the depth (START WITH's rows are level 1) and the PARENT of every one."""
    text = lineage_sql.merge_sources_up(ORACLE, n, depth)
    edges = re.match(r"WITH (merge_edges AS \(.*?\)), reach AS", text).group(1).replace("DWH.", "")
    links = re.search(r"e\.CHILD, e\.PARENT FROM \((.*)\) e START WITH", text).group(1).replace("DWH.", "")
    level = int(re.search(r"CONNECT BY NOCYCLE PRIOR e\.PARENT = e\.CHILD AND LEVEL <= (\d+)\) SELECT me\.", text).group(1))
    return (f"WITH RECURSIVE {edges}, links(CHILD, PARENT) AS ({links}), "
            "up(CID, LVL) AS (SELECT j.value, 0 FROM json_each(:ids) AS j UNION "
            f"SELECT l.PARENT, u.LVL + 1 FROM up u JOIN links l ON l.CHILD = u.CID WHERE u.LVL < {level}) "
            f"SELECT l.CHILD AS CID FROM up u JOIN links l ON l.CHILD = u.CID WHERE u.LVL < {level} "
            "UNION SELECT CID FROM up WHERE LVL >= 1")


class OracleReach(LineageReads):
    """The lineage reads on the SQLite source whose one merge statement returns what the Oracle
    one does: the merge rows into the seeds and into every lot its links reach up within the depth."""

    reached: set[str] = set()

    def _merge_edges_up(self, seeds, depth):
        out = defaultdict(list)
        if not seeds or depth < 0:
            return out
        binds = {"ids": json.dumps(seeds)}
        self.reached = {r[0] for r in self._rows(oracle_reach_on_sqlite(len(seeds), depth), binds)}
        sql = (f"WITH reach AS ({oracle_reach_on_sqlite(len(seeds), depth)}) "
               "SELECT ca.LOTID, ca.CONTAINERID, ca.CONTAINERNAME FROM DW_MES_PJ_COMBINEDASSYLOTS ca "
               "WHERE ca.LOTID IN (SELECT CID FROM reach)")
        for position, (target, source, name) in enumerate(self._rows(sql, binds)):
            out[target].append((target, source, name, position))
        return out


def walked(lineage: BackwardLineage, depth: int) -> set[str]:
    """The lots whose parents the walk looked up: those within ``depth - 1`` levels of a seed."""
    out, frontier = set(lineage.seeds), list(lineage.seeds)
    for _ in range(depth - 1):
        frontier = [p for c in frontier for p in lineage.parent_map.get(c, ()) if p not in out]
        out.update(frontier)
    return out


def _same(old: BackwardLineage, new: BackwardLineage) -> None:
    assert json.dumps(asdict(new), default=list) == json.dumps(asdict(old), default=list)
    assert json.dumps(new.to_dict()) == json.dumps(old.to_dict())
    assert list(new.spool_rows()) == list(old.spool_rows())


@pytest.fixture(scope="module")
def sample(sample_db):
    conn = sqlite3.connect(sample_db)
    cids = [r[0] for r in conn.execute("SELECT CONTAINERID FROM DW_MES_CONTAINER ORDER BY rowid")]
    targets = sorted({r[0] for r in conn.execute("SELECT LOTID FROM DW_MES_PJ_COMBINEDASSYLOTS "
                                                 "WHERE LOTID IS NOT NULL")})
    gd = [r[0] for r in conn.execute("SELECT CONTAINERID FROM DW_MES_CONTAINER WHERE MFGORDERNAME LIKE 'GD%' "
                                     "OR CONTAINERNAME LIKE 'GD%' ORDER BY rowid")]
    conn.close()
    return sample_db, cids, targets, gd


def _seed_sets(cids, targets, gd):
    rnd = random.Random(23)
    yield [], 20
    yield cids, 20
    yield targets, 20
    yield cids[-200:] + ["ffffffffffffffff", " " + cids[0]], 20
    yield gd + targets[:10], 20
    for depth in (1, 2, 3, 4, 7):
        yield rnd.sample(targets, min(40, len(targets))), depth
    for _ in range(30):
        pool = rnd.choice((cids, targets, targets + gd))
        yield rnd.sample(pool, rnd.randint(1, min(150, len(pool)))), rnd.choice((1, 2, 5, 20))


def test_one_merge_statement_per_request_gives_the_per_level_lineage(sample):
    path, cids, targets, gd = sample
    assert len(targets) > 50 and gd
    old_src, new_src = Counting(path), Counting(path)
    merged = 0
    try:
        for seeds, depth in _seed_sets(cids, targets, gd):
            old_src.merge_reads = new_src.merge_reads = 0
            old = per_level_backward(old_src, seeds, depth)
            new = LineageReads(new_src).lineage_backward(seeds, depth)
            _same(old, new)
            merged += bool(new.merge_edges)
            # Given a walk of several levels, when the new one runs, then it reads the merges once.
            assert new_src.merge_reads == (1 if seeds else 0)
            assert old_src.merge_reads >= new_src.merge_reads
    finally:
        old_src.close()
        new_src.close()
    assert merged > 30  # most seed sets do walk through merges


def test_the_oracle_statements_links_reach_every_level_of_the_walk(sample):
    path, cids, targets, gd = sample
    old_src, reach_src = SqliteSource(path), OracleReach(SqliteSource(path))
    with sqlite3.connect(path) as conn:
        text = lineage_sql.merge_sources_up(ORACLE, 1, 1).replace("DWH.", "")
        edges = re.match(r"WITH (merge_edges AS \(.*?\)), reach AS", text).group(1)
        links = re.search(r"FROM \((.*)\) e START WITH", text).group(1)
        linked = {r[0] for r in conn.execute(f"WITH {edges} SELECT CHILD FROM ({links})")}
    try:
        for seeds, depth in _seed_sets(cids, targets, gd):
            old, new = per_level_backward(old_src, seeds, depth), reach_src.lineage_backward(seeds, depth)
            _same(old, new)
            # Every lot whose merges the walk needs is one the statement reaches (those without
            # merge rows too: a later merge, or another data set, would need them).
            assert walked(old, depth) <= reach_src.reached | (set(old.seeds) - linked)
    finally:
        old_src.close()
        reach_src.source.close()


def test_the_statement_binds_in_lists_of_1000_and_walks_to_the_depth():
    up = lineage_sql.merge_sources_up(ORACLE, 2500, 19)
    assert up.count("LOTID IN (:p") == 0 and up.count("e.CHILD IN (:p") == 3  # the seeds bound once
    assert ":p2499)" in up and ":p2500" not in up
    assert max(len(m.split(", ")) for m in re.findall(r"IN \((:p[^)]*)\)", up)) == 1000
    assert "CONNECT BY NOCYCLE PRIOR e.PARENT = e.CHILD AND LEVEL <= 19" in up
    # DW_MES_PJ_COMBINEDASSYLOTS read once, for the walk and the answer.
    assert up.count("DWH.DW_MES_PJ_COMBINEDASSYLOTS") == 1 and "DWH.DW_MES_CONTAINER c" in up
    assert up.endswith("me.LOTID IN (SELECT r.CHILD FROM reach r) OR me.LOTID IN (SELECT r.PARENT FROM reach r)")
    assert lineage_sql.merge_sources_up(SQLITE, 2500, 19) == (
        "SELECT ca.LOTID, ca.CONTAINERID, ca.CONTAINERNAME FROM DW_MES_PJ_COMBINEDASSYLOTS ca "
        "WHERE ca.LOTID IS NOT NULL")
