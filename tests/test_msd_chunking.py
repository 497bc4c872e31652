"""Chunk invariance: many units in any order (one run twice, replaced) equal one unit over all rows."""

from __future__ import annotations

import random

import pytest

from tracebus.trace import msd
from tracebus.trace.domains import WORKCENTER_GROUPS
from tracebus.trace.msd import lots
from tests.msd_reference import fold_lot_upstream_into
from tests.msd_support import (aggregate, columns_of, det_row, detection_partial, downstream,
                               material, unit_partial, upstream)

GROUPS = [g.name for g in WORKCENTER_GROUPS] + [None, "", "XYZ"]
REASONS = [f"R{i:02d}" for i in range(14)] + [" ", None]


def _detection(rng, seeds):
    rows = []
    for cid in seeds:
        trackin = rng.choice([100, 250, 400, 1000, None])
        meta = dict(pj=rng.choice(["PJ1", "PJ2 ", None]), pkg=rng.choice(["PK1", "PK2"]),
                    workcenter=rng.choice(["TMTT", "成型", "焊接_WB", "X"]))
        day = f"2025-01-{rng.randint(1, 6):02d} 10:00:00"
        eq, wf = rng.choice(["T1", "T2", " T3 ", "", None]), rng.choice(["WF1", "WF2", " ", None])
        reasons = rng.sample(REASONS, rng.randint(0, 3))
        if not reasons:
            rows.append(det_row(cid, "N" + cid, trackin, eq, wf, day, None, 0, **meta))
        for r in reasons:
            rows.append(det_row(cid, "N" + cid, trackin, eq, wf, day, r, rng.choice([0, 3, 7, 20, 55]), **meta))
    return rows


def _events_backward(rng, cids):
    up, mats = [], []
    for cid in cids:
        for _ in range(rng.randint(0, 4)):
            g = rng.choice(GROUPS)
            m = rng.randint(0, 14)
            up.append(upstream(cid, str(g), g, rng.choice([f"E{m}", None, " "]),
                               rng.choice([f"M{m}", f" M{m} ", "", None])))
        for _ in range(rng.randint(0, 2)):
            mats.append(material(cid, rng.choice(["P1", "P2", " P3", "", None]),
                                 rng.choice(["L1", "L2", None]), rng.choice(["DBX", None]),
                                 rng.choice(["desc a", "desc b", "", None])))
    return {"upstream_history": up, "materials": mats}


def _events_forward(rng, cids):
    up, rej = [], []
    for cid in cids:
        for _ in range(rng.randint(0, 3)):
            g = rng.choice(GROUPS)
            up.append(upstream(cid, str(g), g, "E", rng.choice([f"M{rng.randint(0, 13)}", None]),
                               ts=f"2025-02-{rng.randint(1, 5):02d} 08:00:00", qty=rng.choice([0, 50, 80])))
        for _ in range(rng.randint(0, 3)):
            rej.append(downstream(cid, rng.choice(GROUPS), rng.choice(REASONS),
                                  rng.choice([f"M{rng.randint(0, 13)}", None]), rng.choice([0, 2, 9]),
                                  f"2025-02-{rng.randint(1, 5):02d}"))
    return {"upstream_history": up, "downstream_rejects": rej}


def _dataset(rng, direction):
    seeds = [f"S{i:03d}" for i in range(60)]
    if direction == "backward":
        pool = [f"W{i}" for i in range(12)]
        ancestors = {s: rng.sample(pool, rng.randint(0, 3)) for s in seeds if rng.random() < 0.9}
        lineage = {"ancestors": ancestors,
                   "seed_roots": {s: rng.choice(["WF-A", "WF-B", "", "WF-C"]) for s in seeds}}
        cids = seeds + pool
        events = _events_backward(rng, cids)
    else:
        kids = [f"D{i:03d}" for i in range(40)]
        children = {}
        for k in kids:  # a DAG: each descendant hangs below one or two earlier nodes
            for parent in rng.sample(seeds + kids[:kids.index(k)], rng.randint(1, 2)):
                children.setdefault(parent, []).append(k)
        lineage = {"children_map": children}
        events = _events_forward(rng, seeds + kids)
    return seeds, _detection(rng, seeds), lineage, events


def _chunks(rng, items, max_size):
    items = list(items)
    rng.shuffle(items)
    out = []
    while items:
        n = rng.randint(1, max_size)
        out.append(items[:n])
        items = items[n:]
    return out


def _chunked(rng, params, seeds, det_rows, lineage, events, **kw):
    by_cid = {}
    for r in det_rows:
        by_cid.setdefault(r["CONTAINERID"], []).append(r)
    det_chunks = [[r for cid in chunk for r in by_cid[cid]] for chunk in _chunks(rng, by_cid, 9)]
    det = detection_partial(params, det_chunks, lineage)
    units = {}
    for domain, rows in events.items():
        for i, chunk in enumerate(_chunks(rng, sorted({r[0] for r in rows}), 7)):
            units[(domain, i)] = (domain, chunk, rows)
    order = list(units)
    rng.shuffle(order)
    stored = {}
    for uid in order + [order[len(order) // 2]]:  # one unit runs twice: its partial is replaced
        domain, chunk, rows = units[uid]
        stored[uid] = unit_partial(params, det, lineage, seeds, domain, chunk, rows)
    parts = [det] + [stored[u] for u in order]
    rng.shuffle(parts)
    return msd.finalize(msd.merge_all(params.direction, parts), params, **kw)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("direction", ["backward", "forward"])
@pytest.mark.parametrize("extra", [{}, {"loss_reasons": "R01,R02,R03"}, {"pj_types": ["PJ1", "PJ2"]}])
def test_many_units_in_any_order_equal_one_unit(seed, direction, extra):
    rng = random.Random(seed)
    seeds, det_rows, lineage, events = _dataset(rng, direction)
    params = msd.MsdParams.from_params({"station": "測試", "direction": direction, **extra})
    kw = {"resource_families": {"E3": "FAM"}} if direction == "backward" else {}
    whole = aggregate(params, det_rows, lineage, seeds, events, **kw)
    assert whole["kpi"] and (whole["charts"]["by_machine"] if direction == "backward"
                             else whole["charts"]["by_downstream_station"])
    for attempt in range(3):
        assert _chunked(rng, params, seeds, det_rows, lineage, events, **kw) == whole


def test_merge_is_commutative_and_associative():
    rng = random.Random(7)
    seeds, det_rows, lineage, events = _dataset(rng, "backward")
    params = msd.MsdParams.from_params({"station": "測試"})
    det = detection_partial(params, [det_rows], lineage)
    rows = events["upstream_history"]
    a, b, c = (unit_partial(params, det, lineage, seeds, "upstream_history", chunk, rows)
               for chunk in _chunks(rng, sorted({r[0] for r in rows}), 30)[:3])
    assert msd.merge(a, b) == msd.merge(b, a)
    assert msd.merge(msd.merge(a, b), c) == msd.merge(a, msd.merge(b, c))


def _by_lots(rng, params, seeds, det_rows, lineage, events, max_lots, **kw):
    """The backward job's way: units own chunks of lots and read every lineage node of their
    lots (shared ancestors are read by several units, counted and recorded by the first)."""
    det = detection_partial(params, [det_rows], lineage)
    defective = det["det"].get("defective", {})
    ancestors = lineage["ancestors"]
    chunks = _chunks(rng, seeds, max_lots)
    owned, seen = [], set()  # the job decides at submit which unit counts a shared node
    for chunk in chunks:
        wanted = set(chunk).union(*(ancestors[lot] for lot in chunk if lot in ancestors))
        owned.append(wanted - seen)
        seen |= wanted
    stored = {}
    order = list(range(len(chunks)))
    rng.shuffle(order)
    for c in order + [order[len(order) // 2]]:  # one unit runs twice: its partial is replaced
        members = {lot: [lot, *ancestors[lot]] for lot in chunks[c] if lot in ancestors}
        wanted = set(chunks[c]).union(*members.values())
        folds = []
        for n, (domain, rows) in enumerate(events.items()):
            fold = lots.NodeFold(owned[c], params.upstream_groups, n * lots.ID_SPAN)
            fold.fold(columns_of(domain), [r for r in rows if r[0] in wanted])
            folds.append(fold)
        table, (nodes, reached, equipment) = lots.combine([(f.base, f.table, f.nodes, f.machines, f.equipment)
                                                           for f in folds])
        part = lots.lot_cells(lots.lot_unions(members, nodes), defective)
        attributed = {lot: m for lot, m in members.items() if lot in defective}
        eqid = [lots.untag(table[k]) for k in lots.reached(attributed, reached)]
        machines = {lot: len(u) for lot, u in lots.lot_unions(members, equipment).items()}
        desc, records = {}, {}
        for f in folds:
            for k, d in f.desc.items():
                desc[k] = min(desc.get(k, d), d)
            for cid, rec in f.records.items():
                records.setdefault(cid, {"m": set(), "t": set()})
                records[cid]["m"] |= set(rec.machines)
                records[cid]["t"] |= set(rec.materials)
        stored[c] = ([[table[k], *v] for k, v in part.items()], desc, records, sum(f.rows for f in folds), machines,
                     eqid)
    cells, desc_all, records_all, machines_all, eqid_all = {}, {}, {}, {}, {}
    for part, desc, records, _, machines, eqid in stored.values():
        machines_all.update(machines)
        eqid_all.update(dict.fromkeys(eqid, 1))
        lots.add_cells(cells, part)
        for k, d in desc.items():
            desc_all[k] = min(desc_all.get(k, d), d)
        records_all.update(records)
    counted = sum(v[3] for v in stored.values())
    out_cells = lots.output_cells(cells)
    merged = {**det, "ev": {"desc": desc_all, "eqid": eqid_all}}
    return msd.finalize(merged, params, cells=out_cells, **kw), counted, records_all, machines_all


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("extra", [{}, {"loss_reasons": "R01,R02,R03"}, {"pj_types": ["PJ1", "PJ2"]}])
def test_units_owning_lots_equal_one_unit(seed, extra):
    rng = random.Random(seed)
    seeds, det_rows, lineage, events = _dataset(rng, "backward")
    params = msd.MsdParams.from_params({"station": "測試", **extra})
    kw = {"resource_families": {"E3": "FAM"}}
    whole = aggregate(params, det_rows, lineage, seeds, events, **kw)
    assert whole["charts"]["by_machine"] and whole["materials_attribution"]
    fetched = set(seeds).union(*lineage["ancestors"].values())
    rows = sum(1 for domain_rows in events.values() for r in domain_rows if r[0] in fetched)
    for max_lots in (1, 7, 25, 60):
        got, counted, records, machines = _by_lots(rng, params, seeds, det_rows, lineage, events, max_lots, **kw)
        assert got == whole
        assert counted == rows  # each fetched CID's rows counted once, however many units read it
    # Each CID's detail record as the library's per-lot fold makes it, each CID its own lot.
    old: dict = {}
    itself = {"lots": {cid: [cid] for cid in fetched}}
    for domain, domain_rows in events.items():
        fold_lot_upstream_into(old, itself, columns_of(domain), [r for r in domain_rows if r[0] in fetched])
    assert records == {c: {"m": r["m"], "t": r["t"]} for c, r in old.items()}
    # Each lot's UPSTREAM_MACHINE_COUNT: the distinct equipment ids over its lineage nodes.
    lineage_of = {lot: [lot, *a] for lot, a in lineage["ancestors"].items()}
    assert machines == {lot: len(set().union(*(old.get(n, {}).get("e", ()) for n in members)))
                        for lot, members in lineage_of.items()}


def test_lot_unions_and_cells_by_hand():
    nodes = {"L1": [0], "W": [0, 1], "L2": []}
    unions = lots.lot_unions({"L1": ["L1", "W"], "L2": ["L2", "W", "GONE"]}, [nodes, {"L2": [7]}])
    assert unions == {"L1": {0, 1}, "L2": {0, 1, 7}}
    # L2 is not defective: it reaches the machines but counts for none.
    cells = lots.lot_cells(unions, {"L1": {"d": 5, "i": 100}, "L3": {"d": 1, "i": 10}})
    assert cells == {0: [1, 5, 100], 1: [1, 5, 100]}
    # Quantities that cannot be packed (a float) take the plain path, with the same result.
    assert lots.lot_cells(unions, {"L1": {"d": 5.5, "i": 100}}) == {0: [1, 5.5, 100], 1: [1, 5.5, 100]}
    table = ["m\x1fA", "m\x1fB"]
    named = {table[k]: v for k, v in cells.items()}
    lots.add_cells(named, [["m\x1fA", 2, 7, 50], ["p\x1fP", 1, 1, 1]])
    out = lots.output_cells(named)
    assert out["machine"] == {"A": {"n": 3, "d": 12, "i": 150}, "B": {"n": 1, "d": 5, "i": 100}}
    assert out["material"] == {"P": {"n": 1, "d": 1, "i": 1}} and not out["attr"] and not out["mattr"]
    assert lots.reached({"L1": ["L1", "W"], "L2": ["GONE"]}, [{"W": [4, 5], "L1": [5]}]) == {4, 5}


def test_combine_keeps_one_id_per_key():
    span = lots.ID_SPAN
    a = (0, ["m\x1fA", "x\x1fE"], {"N1": [0, 1, 0]}, {})
    b = (span, ["p\x1fP"], {"N1": [span], "N2": [span]}, {"N2": [span]})
    table, (nodes, equipment) = lots.combine([a, b])
    assert table == {0: "m\x1fA", 1: "x\x1fE", span: "p\x1fP"}
    assert nodes == [{"N1": [0, 1, 0]}, {"N1": [span], "N2": [span]}] and equipment == [{}, {"N2": [span]}]
    # Without a station filter a materials row's machine is a key both domains make: one id.
    c = (span, ["p\x1fP", "m\x1fA"], {"N3": [span + 1, span]}, {})
    table, (nodes, _) = lots.combine([a, c])
    assert table == {0: "m\x1fA", 1: "x\x1fE", span: "p\x1fP"} and nodes[1] == {"N3": [0, span]}
    assert lots.lot_unions({"L": ["N1", "N3"]}, nodes) == {"L": {0, 1, span}}
