"""The query-tool page's lineage trees (issue 25, items 2 and 4).

useLotLineage.ts and useReverseLineage.ts POST ``/api/trace/lineage`` with ``{profile:
"query_tool" | "query_tool_reverse", container_ids}`` and no params, and draw ``children_map`` /
``parent_map``, ``roots``, ``names``, ``nodes``, ``edges`` (and ``leaf_serials``). The answers for
lots of the sample data with splits, merges, wafer and GD links are checked against the
original's steps (``LineageEngine.resolve_forward_tree`` / ``resolve_full_genealogy``) written
here in SQL, straight on the database: recursive CTEs for its ``CONNECT BY`` statements.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.api_support import api_broker, api_settings, make_client, trace_workers, user  # noqa: F401
from tests.test_api_msd_stages import MSD, SYNC
from tests.test_e2e_contracts import poll_job_until_complete, request
from tests.test_e2e_http import System
from tracebus.trace.lineage_cache import LineageCache
from tracebus.trace.msd.job import plan as msdplan
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.sqlite import SqliteSource

IN = "(SELECT value FROM json_each(:ids))"
#: sql/lineage/split_ancestors.sql: CONNECT BY NOCYCLE PRIOR SPLITFROMID = CONTAINERID, LEVEL <= 20.
UP = f"""WITH RECURSIVE up(cid, parent, name, lvl) AS (
  SELECT CONTAINERID, SPLITFROMID, CONTAINERNAME, 1 FROM DW_MES_CONTAINER WHERE CONTAINERID IN {IN}
  UNION SELECT c.CONTAINERID, c.SPLITFROMID, c.CONTAINERNAME, up.lvl + 1 FROM DW_MES_CONTAINER c
  JOIN up ON c.CONTAINERID = up.parent WHERE up.lvl < 20)
SELECT DISTINCT cid, parent, name FROM up"""
#: sql/lineage/split_descendants.sql: CONNECT BY NOCYCLE PRIOR CONTAINERID = SPLITFROMID, LEVEL <= 20.
DOWN = f"""WITH RECURSIVE down(cid, parent, name, lvl) AS (
  SELECT CONTAINERID, SPLITFROMID, CONTAINERNAME, 1 FROM DW_MES_CONTAINER WHERE CONTAINERID IN {IN}
  UNION SELECT c.CONTAINERID, c.SPLITFROMID, c.CONTAINERNAME, down.lvl + 1 FROM DW_MES_CONTAINER c
  JOIN down ON c.SPLITFROMID = down.cid WHERE down.lvl < 20 AND c.CONTAINERID <> down.cid)
SELECT DISTINCT cid, parent, name FROM down"""
MERGES = f"SELECT LOTID, CONTAINERID FROM DW_MES_PJ_COMBINEDASSYLOTS WHERE LOTID IN {IN} AND CONTAINERID <> LOTID"
SERIALS = (f"SELECT DISTINCT CONTAINERID, FINISHEDNAME FROM DW_MES_PJ_COMBINEDASSYLOTS WHERE CONTAINERID IN {IN} "
           "AND FINISHEDNAME IS NOT NULL")
SNAPSHOT = (f"SELECT CONTAINERID, CONTAINERNAME, FIRSTNAME, MFGORDERNAME, ORIGINALCONTAINERID, SPLITFROMID, "
            f"OBJECTTYPE FROM DW_MES_CONTAINER WHERE CONTAINERID IN {IN}")
#: lot_ids_by_name.sql (the smallest CID of a duplicated name).
WAFERS = (f"SELECT CONTAINERNAME, MIN(CONTAINERID) FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT' "
          f"AND CONTAINERNAME IN {IN} GROUP BY CONTAINERNAME")
#: Lots with every kind of link: merge targets with a split parent, a merge source with a
#: finished serial, a GD rework lot.
SEEDS = """
SELECT * FROM (SELECT a.LOTID FROM DW_MES_PJ_COMBINEDASSYLOTS a JOIN DW_MES_CONTAINER c ON c.CONTAINERID = a.LOTID
               WHERE c.SPLITFROMID IS NOT NULL ORDER BY a.LOTID LIMIT 2)
UNION ALL SELECT * FROM (SELECT CONTAINERID FROM DW_MES_PJ_COMBINEDASSYLOTS WHERE FINISHEDNAME IS NOT NULL
                         ORDER BY CONTAINERID LIMIT 1)
UNION ALL SELECT * FROM (SELECT CONTAINERID FROM DW_MES_CONTAINER WHERE CONTAINERNAME LIKE 'GD%'
                         AND ORIGINALCONTAINERID IS NOT NULL ORDER BY CONTAINERID LIMIT 1)
"""


class Db:
    """The statements above, run on the sample."""

    def __init__(self, path):
        self.conn = sqlite3.connect(path)

    def rows(self, sql: str, ids) -> list[tuple]:
        return self.conn.execute(sql, {"ids": json.dumps(sorted(set(ids)))}).fetchall()

    def snapshots(self, ids) -> dict[str, tuple]:
        return {r[0]: r for r in self.rows(SNAPSHOT, ids)}

    def semantic(self, nodes: set[str]) -> tuple[set[tuple], set[str], dict[str, str]]:
        """Wafer-origin and GD-rework edges of every node (and of the wafers and GD sources
        they bring in), the wafer CIDs, and the names of all those containers."""
        snaps = self.snapshots(nodes)
        wafer = dict(self.rows(WAFERS, {s[2] for s in snaps.values() if s[2]}))
        gd = lambda s: any((v or "").upper().startswith("GD") for v in (s[1], s[3]))  # noqa: E731
        extra = (set(wafer.values()) | {s[4] or s[5] for s in snaps.values() if gd(s) and (s[4] or s[5])}) - set(snaps)
        snaps.update(self.snapshots(extra))
        edges = {(wafer[s[2]], cid, "wafer_origin") for cid, s in snaps.items() if wafer.get(s[2]) not in (None, cid)}
        edges |= {(s[4] or s[5], cid, "gd_rework_source") for cid, s in snaps.items()
                  if gd(s) and (s[4] or s[5]) not in (None, cid)}
        return edges, {a for a, _, t in edges if t == "wafer_origin"}, {c: s[1] for c, s in snaps.items() if s[1]}


def split_up(db: Db, ids) -> tuple[dict, dict]:
    rows = db.rows(UP, ids)
    return ({c: p for c, p, _ in rows if p and p != c}, {c: n for c, _, n in rows if n})


def expected_forward(db: Db, seeds: list[str]) -> dict:
    parent_of, names = split_up(db, seeds)
    roots = set()
    for seed in seeds:
        node, hops = seed, 0
        while node in parent_of and hops < 20:
            node, hops = parent_of[node], hops + 1
        roots.add(node)
    down = db.rows(DOWN, roots)
    names |= {c: n for c, _, n in down if n}
    split = {(p, c, "split_from") for c, p, _ in down if p and p != c}
    children = {}
    for p, c, _ in split:
        children.setdefault(p, set()).add(c)
    nodes = roots | {x for p, c, _ in split for x in (p, c)}
    serials = {}
    for cid, finished in db.rows(SERIALS, nodes - set(children)):
        serials.setdefault(cid, []).append(finished)
    merges = {(s, t, "merge_source") for t, s in db.rows(MERGES, nodes)} - {(p, c, "merge_source") for p, c, _ in split}
    nodes |= {x for s, t, _ in merges for x in (s, t)}
    semantic, wafers, more_names = db.semantic(nodes)
    for p, c, _ in semantic:
        children.setdefault(p, set()).add(c)
    nodes |= {x for p, c, _ in semantic for x in (p, c)}
    incoming = {c for cs in children.values() for c in cs}
    return {"roots": sorted(nodes - incoming), "children_map": {p: sorted(c) for p, c in children.items()},
            "leaf_serials": {c: sorted(s) for c, s in serials.items()}, "names": names | more_names,
            "edges": split | merges | semantic, "nodes": nodes, "wafers": wafers}


def expected_reverse(db: Db, seeds: list[str]) -> dict:
    parent_of, names = split_up(db, seeds)
    known = set(seeds) | set(parent_of) | set(parent_of.values())
    sources = {}
    for t, s in db.rows(MERGES, known):
        sources.setdefault(t, set()).add(s)
    new = {s for ss in sources.values() for s in ss} - known
    merge_parent_of, merge_names = split_up(db, new) if new else ({}, {})
    parents = {}
    for c, p in (parent_of | merge_parent_of).items():
        parents.setdefault(c, set()).add(p)
    for t, ss in sources.items():
        parents.setdefault(t, set()).update(ss)
    nodes = set(seeds) | set(parents) | {p for ps in parents.values() for p in ps}
    semantic, wafers, more_names = db.semantic(nodes)
    for p, c, _ in semantic:
        parents.setdefault(c, set()).add(p)
    ancestors = {}
    for seed in seeds:
        seen, frontier = set(), set(parents.get(seed, ()))
        while frontier:
            seen |= frontier
            frontier = {p for c in frontier for p in parents.get(c, ()) if p not in seen}
        ancestors[seed] = sorted(seen)
    split = {(p, c, "split_from") for c, p in (parent_of | merge_parent_of).items()}
    merges = {(s, t, "merge_source") for t, ss in sources.items() for s in ss} - {(p, c, "merge_source")
                                                                                for p, c, _ in split}
    return {"parent_map": {c: sorted(p) for c, p in parents.items()}, "ancestors": ancestors,
            "names": names | merge_names | more_names, "edges": split | merges | semantic, "wafers": wafers}


@pytest.fixture(scope="module")
def seeds(sample_db) -> list[str]:
    with sqlite3.connect(sample_db) as conn:
        return [r[0] for r in conn.execute(SEEDS)]


@pytest.fixture
def client(api_settings, api_broker, user):
    return make_client(api_settings, api_broker, user, **SYNC)


def _edges(answer: dict) -> set[tuple]:
    listed = [(e["from_cid"], e["to_cid"], e["edge_type"]) for e in answer["edges"]]
    assert len(listed) == len(set(listed))  # deduplicated, as the original's _to_edge_payload
    return set(listed)


def test_the_forward_tree_is_the_originals_from_the_roots_down(client, sample_db, seeds):
    resp = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool", "container_ids": seeds})

    answer, want = resp.json, expected_forward(Db(sample_db), seeds)
    assert resp.status_code == 200 and answer["stage"] == "lineage" and answer["direction"] == "forward"
    assert {t for _, _, t in want["edges"]} == {"split_from", "merge_source", "wafer_origin", "gd_rework_source"}
    assert _edges(answer) == want["edges"]
    assert answer["roots"] == want["roots"] and not set(answer["roots"]) & set(seeds)
    assert {p: sorted(c) for p, c in answer["children_map"].items()} == want["children_map"]
    assert answer["leaf_serials"] == want["leaf_serials"] and answer["leaf_serials"]
    assert answer["names"] == want["names"] and answer["total_nodes"] == len(want["nodes"]) > 4 * len(seeds)
    # Merges are edges only, not children: the tree is splits, wafers and GD reworks.
    assert not {(s, t) for s, t, k in want["edges"] if k == "merge_source"} & {
        (p, c) for p, cs in answer["children_map"].items() for c in cs}
    assert set(answer["nodes"]) == want["nodes"]
    for cid, node in answer["nodes"].items():
        assert node["container_id"] == cid and node["container_name"] == want["names"].get(cid, cid)
    assert {c for c, n in answer["nodes"].items() if n["node_type"] == "WAFER"} == want["wafers"]
    assert {n["node_type"] for n in answer["nodes"].values()} >= {"WAFER", "GD", "GA"}


def test_the_reverse_tree_is_the_originals_parent_map(client, sample_db, seeds):
    resp = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool_reverse", "container_ids": seeds})

    answer, want = resp.json, expected_reverse(Db(sample_db), seeds)
    assert resp.status_code == 200 and answer["stage"] == "lineage" and answer["direction"] == "backward"
    assert {t for _, _, t in want["edges"]} == {"split_from", "merge_source", "wafer_origin", "gd_rework_source"}
    assert answer["roots"] == seeds and answer["merges"] == {}
    assert {c: sorted(p) for c, p in answer["parent_map"].items()} == want["parent_map"]
    assert answer["ancestors"] == want["ancestors"] and _edges(answer) == want["edges"]
    shown = set(seeds).union(*map(set, want["ancestors"].values()))
    assert answer["names"] == {c: n for c, n in want["names"].items() if c in shown}
    assert (answer["total_nodes"], answer["total_ancestor_count"]) == (len(shown), len(shown - set(seeds)))
    assert {c for c, n in answer["nodes"].items() if n["node_type"] == "WAFER"} == want["wafers"]
    merged = [c for c, sources in answer["merge_edges"].items() if sources]
    assert merged and all(set(answer["merge_edges"][c]) <= set(answer["parent_map"][c]) for c in merged)
    for seed in seeds:  # a root is a parentless ancestor (or the seed itself)
        root = next(c for c in [*answer["ancestors"][seed], seed] if answer["names"].get(c, c) == answer["seed_roots"][seed])
        assert not answer["parent_map"].get(root) or root == seed


def test_the_query_tool_trees_ignore_params_and_leave_the_msd_lineage_alone(client, seeds):
    plain = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool", "container_ids": seeds}).json
    backward = client.simulate_post("/api/trace/lineage", json={
        "profile": "query_tool", "container_ids": seeds, "params": {"direction": "backward"}}).json
    msd = client.simulate_post("/api/trace/lineage", json={
        "profile": MSD, "container_ids": seeds, "params": {"direction": "forward"}}).json
    reverse = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool_reverse",
                                                               "container_ids": seeds}).json

    assert backward == plain  # the profile decides, as the original's _resolve_direction
    assert len({plain["query_id"], msd["query_id"], reverse["query_id"]}) == 3
    assert set(msd) == {"stage", "query_id", "trace_lineage_query_id", "total_nodes", "total_ancestor_count"}
    assert "parent_map" not in plain and "children_map" not in reverse and "ancestors" not in plain


def test_an_msd_job_never_takes_a_query_tool_tree_for_its_lineage(client, api_settings, api_broker, sample_db,
                                                                   seeds):
    tree = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool", "container_ids": seeds}).json
    body = {"profile": MSD, "container_ids": seeds, "seed_container_ids": seeds, "domains": ["downstream_rejects"],
            "lineage_query_id": tree["query_id"], "params": {"station": "測試", "direction": "forward"}}
    cache = LineageCache(api_broker.client, api_settings.key_prefix, api_settings.job_ttl_s)

    found = msdplan.resolve_lineage(msdplan.parse(body, body["domains"], "x"), cache, lambda: SqliteSource(sample_db))

    source = SqliteSource(sample_db)
    try:
        direct = LineageReads(source).lineage_forward(seeds).to_dict()
    finally:
        source.close()
    assert cache.get(tree["query_id"])["children_map"] == tree["children_map"] != direct["children_map"]
    assert found["children_map"] == direct["children_map"]  # recomputed: the tree is another answer


def test_through_gunicorn_a_large_tree_is_a_job_with_the_same_answer(sample_db, seeds, tmp_path):
    """The page's 202 path: ``async`` and ``status_url``, poll, GET ``status_url + "/result"``."""
    with sqlite3.connect(sample_db) as conn:
        many = [r[0] for r in conn.execute("SELECT CONTAINERID FROM DW_MES_CONTAINER WHERE SPLITFROMID IS NOT NULL "
                                           "ORDER BY CONTAINERID LIMIT 30")]
    system = System(tmp_path, sample_db, TRACEBUS_TRUSTED_PROXIES="127.0.0.1", TRACE_ASYNC_CID_THRESHOLD="20")
    get = lambda path: request(system.port, "GET", path)  # noqa: E731
    try:
        system.wait_ready()
        answers = {}
        for profile in ("query_tool", "query_tool_reverse"):
            small = request(system.port, "POST", "/api/trace/lineage", {"profile": profile, "container_ids": seeds})
            job = request(system.port, "POST", "/api/trace/lineage", {"profile": profile, "container_ids": many})
            assert small.status == 200 and job.status == 202 and job.json["async"] is True, job.json
            assert job.json["status_url"] == f"/api/trace/lineage/job/{job.json['job_id']}"
            poll_job_until_complete(get, job.json["status_url"], interval_s=0.1)
            answers[profile] = (small.json, get(job.json["status_url"] + "/result").json)
        db = Db(sample_db)
        forward, reverse = answers["query_tool"][1], answers["query_tool_reverse"][1]
        assert _edges(forward) == expected_forward(db, many)["edges"]
        assert {c: sorted(p) for c, p in reverse["parent_map"].items()} == expected_reverse(db, many)["parent_map"]
        assert _edges(answers["query_tool"][0]) == expected_forward(db, seeds)["edges"]
    finally:
        system.stop()
