"""The synthetic MES dataset: determinism, shape of the distributions, the trace CID set."""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from statistics import median

import pytest

from tests.conftest_data import cached_sample
from tracebus.trace import domains
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import DEFAULT_SEED, cids, generate
from tracebus.trace.synth.clock import WINDOW
from tracebus.trace.synth.schema import TABLES
from tracebus.trace.synth.vocab import build_vocab


def _dump(path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}
    finally:
        conn.close()


def _one(path, sql, *params):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def tenth_db():
    return cached_sample(0.1)


def test_same_seed_and_scale_give_identical_tables(sample_db, tmp_path):
    again = tmp_path / "again.db"
    counts = generate(again, scale=0.01)
    first, second = _dump(sample_db), _dump(again)
    assert first == second
    assert {t: len(rows) for t, rows in first.items()} == counts
    other = tmp_path / "other.db"
    generate(other, scale=0.01, seed=7)
    assert _dump(other)["DW_MES_CONTAINER"] != first["DW_MES_CONTAINER"]


def test_generation_leaves_no_temporary_file_even_when_it_fails(tmp_path):
    target = tmp_path / "a-directory"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):
        generate(target, scale=0.01)  # renaming onto a non-empty directory fails at the end
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory"]
    with pytest.raises(ValueError):
        generate(tmp_path / "x.db", scale=0)


def test_scale_001_row_counts_match_the_per_container_densities(sample_db):
    dump = _dump(sample_db)
    containers = len(dump["DW_MES_CONTAINER"])
    assert 1100 <= containers <= 1300
    per_cid = {t: len(dump[t]) / containers for t in TABLES}
    assert 8.5 <= per_cid["DW_MES_LOTWIPHISTORY"] <= 11.5  # DOMAIN.md: ≈10.2
    assert 2.8 <= per_cid["DW_MES_LOTMATERIALSHISTORY"] <= 4.0  # ≈3.4
    assert 2.4 <= per_cid["DW_MES_LOTREJECTHISTORY"] <= 3.6  # ≈3.0
    assert 0.03 <= per_cid["DW_MES_HOLDRELEASEHISTORY"] <= 0.1  # ≈0.06
    assert 150 <= len(dump["DW_MES_JOB"]) <= 350  # ≈25K at scale 1
    assert 200 <= len(dump["DW_MES_SPEC_WORKCENTER_V"]) <= 260
    cids_ = [r[0] for r in dump["DW_MES_CONTAINER"]]
    assert len(set(cids_)) == len(cids_) and all(len(c) == 16 for c in cids_)
    int(cids_[0], 16)
    names = [r[1] for r in dump["DW_MES_CONTAINER"]]
    assert len(set(names)) == len(names)


def test_scale_01_distributions(tenth_db):
    q = lambda sql: _one(tenth_db, sql)  # noqa: E731
    rows = q("SELECT COUNT(*) FROM DW_MES_LOTWIPHISTORY")
    assert 0.02 <= q("SELECT COUNT(*) FROM DW_MES_LOTWIPHISTORY WHERE EQUIPMENTID IS NULL") / rows <= 0.045
    partial = q("SELECT COUNT(*) FROM (SELECT 1 FROM DW_MES_LOTWIPHISTORY WHERE TRACKINTIMESTAMP IS NOT NULL "
                "GROUP BY CONTAINERID, EQUIPMENTID, SPECNAME, TRACKINTIMESTAMP HAVING COUNT(*) > 1)")
    assert 0.03 <= partial / rows <= 0.07
    rejects = q("SELECT COUNT(*) FROM DW_MES_LOTREJECTHISTORY")
    assert 0.01 <= q("SELECT COUNT(*) FROM DW_MES_LOTREJECTHISTORY WHERE LOSSREASONNAME IS NULL") / rejects <= 0.035
    top5 = q("SELECT SUM(n) FROM (SELECT COUNT(*) AS n FROM DW_MES_LOTREJECTHISTORY WHERE LOSSREASONNAME "
             "IS NOT NULL GROUP BY LOSSREASONNAME ORDER BY n DESC LIMIT 5)")
    assert 0.5 <= top5 / rejects <= 0.7
    assert 0.15 <= q("SELECT AVG(DEFECTQTY IS NOT NULL) FROM DW_MES_LOTREJECTHISTORY") <= 0.25
    lots = q("SELECT COUNT(*) FROM DW_MES_CONTAINER")
    assert 0.25 <= 1 - q("SELECT COUNT(DISTINCT CONTAINERID) FROM DW_MES_LOTREJECTHISTORY") / lots <= 0.45
    assert q("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM DW_MES_LOTREJECTHISTORY GROUP BY CONTAINERID)") <= 40
    assert 0.04 <= q("SELECT COUNT(DISTINCT CONTAINERID) FROM DW_MES_HOLDRELEASEHISTORY") / lots <= 0.065
    assert 0.01 <= q("SELECT AVG(RELEASETXNDATE IS NULL) FROM DW_MES_HOLDRELEASEHISTORY") <= 0.06
    assert 0.5 <= q("SELECT AVG(CONTAINERIDS IS NOT NULL) FROM DW_MES_JOB") <= 0.7
    conn = sqlite3.connect(tenth_db)
    trackin = [r[0] for r in conn.execute("SELECT TRACKINQTY FROM DW_MES_LOTWIPHISTORY")]
    reject = [r[0] for r in conn.execute("SELECT REJECTQTY FROM DW_MES_LOTREJECTHISTORY")]
    listed = [r[0].split(",") for r in conn.execute("SELECT CONTAINERIDS FROM DW_MES_JOB WHERE CONTAINERIDS IS NOT NULL")]
    groups = {domains.workcenter_group(r[0]).name if domains.workcenter_group(r[0]) else None
              for r in conn.execute("SELECT DISTINCT WORKCENTERNAME FROM DW_MES_LOTWIPHISTORY")}
    conn.close()
    assert 15000 <= median(trackin) <= 25000
    assert 3 <= median(reject) <= 8
    assert {len(x) for x in listed} <= {1, 2, 3, 4, 5} and max(len(x) for x in listed) == 5
    assert groups == {g.name for g in domains.WORKCENTER_GROUPS} | {None}


def test_trace_set_is_seeds_in_window_plus_all_ancestors(sample_db):
    trace = cids(sample_db)
    assert len(trace) == len(set(trace))
    conn = sqlite3.connect(sample_db)
    containers = conn.execute("SELECT COUNT(*) FROM DW_MES_CONTAINER").fetchone()[0]
    assert 0.92 <= len(trace) / containers <= 0.98  # ≈114K of ≈120K at scale 1
    members = set(trace)
    parents = conn.execute(
        "SELECT CONTAINERID, SPLITFROMID FROM DW_MES_CONTAINER WHERE SPLITFROMID IS NOT NULL "
        "UNION ALL SELECT LOTID, CONTAINERID FROM DW_MES_PJ_COMBINEDASSYLOTS "
        "UNION ALL SELECT c.CONTAINERID, w.CONTAINERID FROM DW_MES_CONTAINER c "
        "JOIN DW_MES_CONTAINER w ON w.CONTAINERNAME = c.FIRSTNAME AND w.CONTAINERID <> c.CONTAINERID").fetchall()
    assert all(parent in members for child, parent in parents if child in members)
    last_tmtt = dict(conn.execute(
        "SELECT CONTAINERID, MAX(TRACKINTIMESTAMP) FROM DW_MES_LOTWIPHISTORY "
        "WHERE WORKCENTERNAME IN ('TMTT', '測試_FT') AND TRACKINTIMESTAMP IS NOT NULL GROUP BY CONTAINERID"))
    conn.close()
    seeds = {c for c, t in last_tmtt.items() if WINDOW[0] <= t < WINDOW[1]}
    assert seeds and seeds < set(last_tmtt)  # some seeds fall outside the window
    assert set(trace[:len(seeds)]) == seeds
    assert cids(sample_db, station="測試") == trace
    assert cids(sample_db, station="no-such-station") == []


def _tmtt_rates(path):
    """(detection input, TMTT reject qty) per seed of the window, and the backward lineage."""
    source = SqliteSource(path)
    qty_in, rejected = {}, Counter()
    for _, rows in MsdReads(source).detect_by_dates("測試", "2025-01-01", "2025-05-31"):
        for row in rows:
            qty_in[row[0]] = row[9]
            rejected[row[0]] += row[12]
    lineage = LineageReads(source).lineage_backward(sorted(qty_in))
    source.close()
    return qty_in, rejected, lineage


def test_bad_machines_and_material_lots_raise_the_tmtt_reject_rate_of_their_descendants(tenth_db):
    qty_in, rejected, lineage = _tmtt_rates(tenth_db)
    vocab = build_vocab(DEFAULT_SEED)
    conn = sqlite3.connect(tenth_db)
    machines, lots, first_seen = defaultdict(set), defaultdict(set), defaultdict(list)
    for cid, name in conn.execute("SELECT CONTAINERID, EQUIPMENTNAME FROM DW_MES_LOTWIPHISTORY"):
        machines[cid].add(name)
    for cid, part, lot in conn.execute(
            "SELECT CONTAINERID, MATERIALPARTNAME, MATERIALLOTNAME FROM DW_MES_LOTMATERIALSHISTORY ORDER BY rowid"):
        lots[cid].add(lot)
        if lot not in first_seen[part]:
            first_seen[part].append(lot)
    conn.close()
    bad_lots = {lot for part in vocab.bad_parts for lot in first_seen[part][1:2]}  # the batch at scale 0.1

    def rate(seeds):
        return sum(rejected[s] for s in seeds) / sum(qty_in[s] for s in seeds)

    def passed(seed, where, bad):
        return any(where[c] & bad for c in [seed, *lineage.ancestors[seed]])

    seeds = list(qty_in)
    by_machine = [s for s in seeds if passed(s, machines, vocab.bad_machines)]
    by_material = [s for s in seeds if passed(s, lots, bad_lots)]
    clean = [s for s in seeds if s not in set(by_machine) | set(by_material)]
    assert len(vocab.bad_machines) == 3 and 0.05 <= len(by_machine) / len(seeds) <= 0.35
    assert rate(by_machine) >= 2.5 * rate(clean)
    assert len(by_material) >= 20 and rate(by_material) >= 2 * rate(clean)


def test_most_seeds_have_ancestors_and_the_fetch_set_is_the_trace_set(sample_db):
    qty_in, _, lineage = _tmtt_rates(sample_db)
    seeds = list(qty_in)
    assert sum(bool(lineage.ancestors[s]) for s in seeds) >= 0.95 * len(seeds)
    # a split parent or merge source besides the wafer
    family = {child for _, child, kind in lineage.edge_list if kind in ("split_from", "merge_source")}
    assert len(family & set(seeds)) >= 0.5 * len(seeds)
    fetch, trace = set(lineage.fetch_cids()), set(cids(sample_db))
    assert len(fetch & trace) >= 0.97 * len(trace) and len(fetch) <= 1.03 * len(trace)


def test_every_material_row_has_a_description(sample_db):
    assert _one(sample_db, "SELECT COUNT(*) FROM DW_MES_LOTMATERIALSHISTORY WHERE DESCRIPTION IS NULL") == 0
    assert _one(sample_db, "SELECT COUNT(*) FROM DW_MES_WIP") > 0
