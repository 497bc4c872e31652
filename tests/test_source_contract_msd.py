"""The MSD half of the source contract: detection rows, seeds, lookups and lineage.

Runs on the same ``contract`` fixture as tests/test_source_contract.py (SQLite always,
Oracle when a DSN is configured). Expected values come from ``SELECT *`` reads through the
:class:`Reference` reader and the rules of MSD.md section 1.1 / DOMAIN.md section 5
re-implemented here in Python, independently of the statements the sources build.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.test_source_contract import Reference, contract  # noqa: F401 (contract is a fixture)
from tracebus.errors import InvalidParams
from tracebus.trace import domains
from tracebus.trace.msd import sql as msd_sql
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources import IN_LIMIT
from tracebus.trace.sources import lineage_sql
from tracebus.trace.sources import queries
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.queries import ORACLE
from tracebus.trace.stages.seeds import SeedReads

_SIX = ("REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY", "PROCESSEDQTY", "DEFECTQTY")


def _at_station(workcenter, groups=("測試",)) -> bool:
    group = domains.workcenter_group(workcenter)
    return group is not None and group.name in groups


def expected_detection(ref: Reference, cids: list[str], bounds=None) -> list[tuple]:
    """MSD.md 1.1 detection rows of ``cids`` at 測試, within [bounds) when given."""
    inside = (lambda t: t is not None and bounds[0] <= t < bounds[1]) if bounds else (lambda t: True)
    hist = [r for r in ref.rows("DW_MES_LOTWIPHISTORY", cids) if _at_station(r["WORKCENTERNAME"])
            and r["EQUIPMENTID"] is not None and r["TRACKINTIMESTAMP"] is not None and inside(r["TRACKINTIMESTAMP"])]
    latest = {}
    for r in sorted(hist, key=lambda r: (r["TRACKINTIMESTAMP"], r["TRACKOUTTIMESTAMP"] is not None,
                                         r["TRACKOUTTIMESTAMP"] or "", _neg(r["EQUIPMENTID"]), _neg(r["SPECNAME"]))):
        latest[r["CONTAINERID"]] = r  # the last one sorted is the one the statement ranks first
    qty = defaultdict(int)
    for r in hist:
        key = (r["CONTAINERID"], r["TRACKINTIMESTAMP"], r["EQUIPMENTID"])
        qty[key] = max(qty[key], r["TRACKINQTY"] or 0)
    rejects = defaultdict(int)
    for r in ref.rows("DW_MES_LOTREJECTHISTORY", list(latest)):
        if _at_station(r["WORKCENTERNAME"]) and inside(r["TXNDATE"]):
            rejects[(r["CONTAINERID"], r["LOSSREASONNAME"])] += sum(r[k] or 0 for k in _SIX)
    box = {c["CONTAINERID"]: c for c in ref.rows("DW_MES_CONTAINER", list(latest))}
    flows = {}
    for w in ref.rows("DW_MES_WIP", list(latest)):
        if w["PRODUCTLINENAME"] is not None and w["PRODUCTLINENAME"] != "點測":
            flows[w["CONTAINERID"]] = min(flows.get(w["CONTAINERID"], w["WORKFLOWNAME"]), w["WORKFLOWNAME"])
    out = []
    for cid, r in latest.items():
        c = box.get(cid, {})
        lot = (cid, c.get("CONTAINERNAME"), c.get("PJ_TYPE"), c.get("PRODUCTLINENAME"),
               flows.get(cid) or r["SPECNAME"], r["FINISHEDRUNCARD"], r["EQUIPMENTID"], r["EQUIPMENTNAME"],
               r["WORKCENTERNAME"], qty[(cid, r["TRACKINTIMESTAMP"], r["EQUIPMENTID"])], r["TRACKINTIMESTAMP"])
        reasons = [(reason, n) for (c_, reason), n in rejects.items() if c_ == cid]
        out += [lot + reason for reason in reasons] or [lot + (None, 0)]
    return out


def _neg(text):
    """Sort key that reverses a text's order (the statement breaks ties by ascending id)."""
    return tuple(-ord(ch) for ch in (text or ""))


def _collect(batches):
    rows = []
    for cols, batch in batches:
        assert cols == list(DETECTION_COLUMNS) and batch
        rows.extend(batch)
    return rows


def test_detection_by_cids_equals_the_reference_across_in_lists(contract):
    source, ref, cids = contract
    rows = _collect(MsdReads(source).detect_by_cids("TMTT", cids + cids[:10] + ["ffffffffffffffff"], batch_rows=300))
    want = expected_detection(ref, cids)
    assert want and Counter(rows) == Counter(want)
    per_lot = Counter(r[0] for r in rows)
    clean = [r for r in rows if r[11] is None and r[12] == 0]
    assert clean, "the sample needs reject-free lots"
    assert all(per_lot[r[0]] == 1 for r in clean if not any(o[0] == r[0] and o[11] for o in rows))


def test_detection_by_dates_finds_every_station_track_in_of_the_window(contract):
    source, ref, _ = contract
    bounds = ("2025-01-06 00:00:00", "2025-01-13 00:00:00")
    found = ref._query(
        f"SELECT DISTINCT CONTAINERID, WORKCENTERNAME FROM {ref.tables['DW_MES_LOTWIPHISTORY']} "
        f"WHERE TRACKINTIMESTAMP >= {ref.date_bind(':a')} AND TRACKINTIMESTAMP < {ref.date_bind(':b')} "
        "AND EQUIPMENTID IS NOT NULL", {"a": bounds[0], "b": bounds[1]})
    seeds = sorted({r["CONTAINERID"] for r in found if _at_station(r["WORKCENTERNAME"])})
    rows = _collect(MsdReads(source).detect_by_dates("測試", "2025-01-06", "2025-01-12", batch_rows=50))
    assert seeds and sorted({r[0] for r in rows}) == seeds
    assert Counter(rows) == Counter(expected_detection(ref, seeds, bounds))
    assert all(bounds[0] <= r[10] < bounds[1] for r in rows)


def test_detection_rejects_bad_requests_at_once(contract):
    source, _, _ = contract
    for args in (("測試", "2025-01-10", "2025-01-01"), ("測試", "2025/01/01", "2025-01-02"),
                 ("no-such-station", "2025-01-01", "2025-01-02")):
        with pytest.raises(InvalidParams):
            MsdReads(source).detect_by_dates(*args)
    with pytest.raises(InvalidParams):
        SeedReads(source).resolve_seeds("serial", ["x"])
    assert list(MsdReads(source).detect_by_cids("測試", [])) == []


def test_container_mode_seeds_are_the_named_lots_that_passed_the_station(contract):
    source, ref, cids = contract
    rows = _collect(MsdReads(source).detect_by_cids("測試", cids))
    names = sorted({r[1] for r in rows})[:5]
    seeds = SeedReads(source).resolve_seeds("lot_id", names + ["NO-SUCH-LOT"])
    assert [n for _, n in seeds] == names and {c for c, _ in seeds} <= {r[0] for r in rows}
    box = {c["CONTAINERNAME"]: c for c in ref.rows("DW_MES_CONTAINER", [c for c, _ in seeds])}
    by_order = SeedReads(source).resolve_seeds("work_order", [box[names[0]]["MFGORDERNAME"]])
    assert (seeds[0][0], names[0]) in by_order


def test_lookups(contract):
    source, ref, _ = contract
    reasons = ref._query(f"SELECT DISTINCT LOSSREASONNAME FROM {ref.tables['DW_MES_LOTREJECTHISTORY']} "
                         "WHERE LOSSREASONNAME IS NOT NULL", {})
    assert MsdReads(source).loss_reasons() == sorted(r["LOSSREASONNAME"] for r in reasons)
    options = MsdReads(source).station_options()
    assert [o["order"] for o in options] == list(range(12))
    assert options[-1] == {"name": "測試", "label": "TMTT", "order": 11} and options[7]["label"] == "掛鍍"
    full = MsdReads(source).container_filter_options()
    assert set(full) == {"pj_types", "packages", "bops", "pj_functions"} and all(full.values())
    picked = full["pj_types"][0]
    narrowed = MsdReads(source).container_filter_options({"pj_types": [picked], "bogus": 1})
    lots = ref._query(f"SELECT DISTINCT PRODUCTLINENAME FROM {ref.tables['DW_MES_CONTAINER']} WHERE PJ_TYPE = :t "
                      "AND PJ_BOP IS NOT NULL", {"t": picked})
    assert narrowed["packages"] == sorted(r["PRODUCTLINENAME"] for r in lots)
    assert narrowed["pj_types"] == full["pj_types"]  # a dimension is never narrowed by itself
    assert MsdReads(source).container_filter_options({"pj_types": ["unknown"]}) == full


def reference_closure(ref: Reference, seeds: list[str], depth: int = 20) -> dict[str, set[str]]:
    """child -> direct parents, read level by level with SELECT * (splits, merges, wafer, GD)."""
    parents: dict[str, set[str]] = {}
    frontier, seen = list(seeds), set(seeds)
    for _ in range(depth):
        if not frontier:
            break
        box = {r["CONTAINERID"]: r for r in ref.rows("DW_MES_CONTAINER", frontier)}
        wafer = {}
        for r in ref.rows("DW_MES_CONTAINER", sorted({b["FIRSTNAME"] for b in box.values() if b["FIRSTNAME"]}),
                          column="CONTAINERNAME"):
            if r["OBJECTTYPE"] == "LOT":
                wafer[r["CONTAINERNAME"]] = min(wafer.get(r["CONTAINERNAME"], r["CONTAINERID"]), r["CONTAINERID"])
        for m in ref.rows("DW_MES_PJ_COMBINEDASSYLOTS", frontier, column="LOTID"):
            parents.setdefault(m["LOTID"], set()).add(m["CONTAINERID"])
        for cid, b in box.items():
            got = parents.setdefault(cid, set())
            got.update(p for p in (b["SPLITFROMID"], wafer.get(b["FIRSTNAME"])) if p)
            if any((b[k] or "").upper().startswith("GD") for k in ("CONTAINERNAME", "MFGORDERNAME")):
                got.update(p for p in (b["ORIGINALCONTAINERID"] or b["SPLITFROMID"],) if p)
            got.discard(cid)
        frontier = [p for c in frontier for p in sorted(parents.get(c, ())) if p not in seen]
        seen.update(frontier)
    return parents


def test_backward_lineage_is_the_closure_of_every_link(contract):
    source, ref, cids = contract
    seeds = sorted({r[0] for r in _collect(MsdReads(source).detect_by_cids("測試", cids))})
    assert len(seeds) > IN_LIMIT // 2
    lineage = LineageReads(source).lineage_backward(seeds + seeds[:3])
    parents = reference_closure(ref, seeds)
    assert lineage.seeds == seeds
    for seed in seeds:
        want, todo = set(), list(parents.get(seed, ()))
        while todo:
            cid = todo.pop()
            if cid not in want and cid != seed:
                want.add(cid)
                todo += parents.get(cid, ())
        assert set(lineage.ancestors[seed]) == want
        root = lineage.root_ids[seed]
        assert root == seed if not want else (root in want and not parents.get(root))
        assert lineage.seed_roots[seed] == lineage.names.get(root, root)
    assert sum(bool(a) for a in lineage.ancestors.values()) >= 0.9 * len(seeds)
    every = set(seeds).union(*map(set, lineage.ancestors.values()))
    assert lineage.total_nodes == len(every) and lineage.total_ancestor_count == len(every - set(seeds))
    names = {r["CONTAINERID"]: r["CONTAINERNAME"] for r in ref.rows("DW_MES_CONTAINER", sorted(every))}
    assert {c: lineage.names[c] for c in every} == names
    answer = lineage.to_dict()
    assert {e["edge_type"] for e in answer["edges"]} >= {"split_from", "merge_source", "wafer_origin"}
    assert {n["node_type"] for n in answer["nodes"].values()} >= {"WAFER", "GA"}
    rows = list(lineage.spool_rows())
    assert (seeds[0], seeds[0], names[seeds[0]], lineage.seed_roots[seeds[0]]) in rows
    assert len(rows) == len(seeds) + sum(map(len, lineage.ancestors.values()))


def test_forward_lineage_reaches_every_split_child_and_merge_target(contract):
    source, ref, cids = contract
    ancestors = LineageReads(source).lineage_backward(cids[-200:])
    starts = sorted({a for v in ancestors.ancestors.values() for a in v})
    forward = LineageReads(source).lineage_forward(starts)
    children, frontier, seen = defaultdict(set), list(starts), set(starts)
    while frontier:
        for r in ref.rows("DW_MES_CONTAINER", frontier, column="SPLITFROMID"):
            children[r["SPLITFROMID"]].add(r["CONTAINERID"])
        for r in ref.rows("DW_MES_PJ_COMBINEDASSYLOTS", frontier):
            children[r["CONTAINERID"]].add(r["LOTID"])
        frontier = sorted({c for p in frontier for c in children.get(p, ())} - seen)
        seen.update(frontier)
    assert forward.children_map == {p: sorted(c) for p, c in children.items() if c}
    assert set(forward.fetch_cids()) == seen and forward.total_nodes == len(seen)
    assert set(cids[-200:]) <= seen
    assert all(c not in {x for v in forward.children_map.values() for x in v} for c in forward.roots)
    serials = ref.rows("DW_MES_PJ_COMBINEDASSYLOTS", [c for c in seen if c not in forward.children_map])
    assert forward.leaf_serials == {c: sorted({r["FINISHEDNAME"] for r in serials if r["CONTAINERID"] == c})
                                    for c in sorted({r["CONTAINERID"] for r in serials if r["FINISHEDNAME"]})}
    assert set(forward.to_dict()) == {"roots", "children_map", "leaf_serials", "names", "nodes", "edges",
                                      "total_nodes"}


def test_oracle_msd_statements_bind_at_most_one_in_list():
    groups = domains.normalize_stations("測試,成型")
    h, params = queries.station_filter(ORACLE, groups, "h.WORKCENTERNAME")
    assert set(params.values()) == {"TMTT", "測試", "成型", "成型_料"}
    sql = msd_sql.detection_rows(ORACLE, IN_LIMIT, h, h.replace("h.", "r."), timed=True)
    assert ":p999" in sql and ":p1000" not in sql and "TO_DATE(:t0" in sql and "DWH.DW_MES_WIP" in sql
    for build in (lineage_sql.snapshot, lineage_sql.ids_by_name,
                  lineage_sql.leaf_serials):
        text = build(ORACLE, IN_LIMIT)
        assert ":p999" in text and ":p1000" not in text and "DWH." in text
    assert lineage_sql.merge_sources_wide(ORACLE, 1500).count(" IN (") == 2  # IN lists of 1,000 OR-ed
    # The descending walk is one statement for many seeds: IN lists of 1,000 OR-ed.
    walk = lineage_sql.descendant_edges(ORACLE, 2500, 20)
    assert walk.count(" IN (") == 3 and ":p2499)" in walk and ":p2500" not in walk
    assert "CONNECT BY NOCYCLE PRIOR e.CHILD = e.PARENT AND LEVEL <= 20" in walk
    # So is the query-tool trees' split descent.
    down = lineage_sql.split_descendants(ORACLE, 2500, 19)
    assert down.count(" IN (") == 3 and ":p2499)" in down and ":p2500" not in down
    assert "CONNECT BY NOCYCLE PRIOR c.CONTAINERID = c.SPLITFROMID AND LEVEL <= 19" in down


@pytest.mark.parametrize("domain", ["upstream_history", "materials"])
def test_backward_rows_are_the_domain_rows_projected_on_what_msd_reads(contract, domain):
    source, _, cids = contract
    # Given more CIDs than one IN list, with duplicates and padding mixed in
    asked = cids + cids[:30] + [f" {cids[0]} ", "ffffffffffffffff"]
    # When the backward MSD job's narrow statement reads them
    wanted = msd_sql.BACKWARD_COLUMNS[domain]
    got, sizes = Counter(), []
    for columns, batch in MsdReads(source).backward_rows(domain, asked, batch_rows=700):
        assert columns == list(wanted)
        sizes.append(len(batch))
        got.update(batch)
    # Then it holds exactly the full statement's rows projected on those columns, as many of
    # them, in batches of at most 700
    full = Counter()
    for columns, batch in source.fetch(domain, cids, 5000):
        pick = [columns.index(c) for c in wanted]
        full.update(tuple(row[i] for i in pick) for row in batch)
    assert full and got == full
    assert max(sizes) <= 700 and all(sizes)


def test_backward_rows_refuse_other_domains_and_bad_batches(contract):
    source, _, cids = contract
    with pytest.raises(InvalidParams, match="upstream_history and materials"):
        list(MsdReads(source).backward_rows("downstream_rejects", cids[:3], 10))
    with pytest.raises(InvalidParams, match="batch_rows"):
        list(MsdReads(source).backward_rows("materials", cids[:3], 0))


def test_oracle_backward_statements_keep_the_latest_track_in_without_sqlite_aggregates():
    sql = msd_sql.backward_rows(ORACLE, "upstream_history", IN_LIMIT)
    assert "ROW_NUMBER() OVER" in sql and "MAX(h.TRACKINTIMESTAMP)" not in sql and ":p999" in sql
    assert "DWH.DW_MES_LOTMATERIALSHISTORY" in msd_sql.backward_rows(ORACLE, "materials", 3)
