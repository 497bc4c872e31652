"""Helpers of the MSD job tests: the worked example of MSD.md §1.7 as a tiny SQLite database,
running an MSD job on real workers, and the single-unit library answer to compare it with."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest_trace import start_workers, trace_service, wait_final
from tracebus.trace import msd
from tests import msd_reference
from tracebus.trace.msd.job import plan as msdplan
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import schema

#: The request of the worked example (date mode, station 測試, backward), lineage given inline.
EXAMPLE_LINEAGE = {"ancestors": {"L1": ["W1"], "L2": ["W1"], "L3": []},
                   "seed_roots": {"L1": "WAFER-1", "L2": "WAFER-1", "L3": "LOT-3"},
                   "names": {"W1": "WAFER-1", "L1": "LOT-1", "L2": "LOT-2", "L3": "LOT-3"}}
EXAMPLE_PARAMS = {"station": "測試", "direction": "backward", "start_date": "2025-01-01", "end_date": "2025-01-02"}


def _wip(cid, workcenter, eq_id, eq_name, ts, qty):
    return (cid, workcenter, eq_id, eq_name, "SPEC-" + workcenter, ts, ts[:11] + "23:00:00", qty, qty, "RC-" + cid, None)


def build_example_db(path: Path) -> Path:
    """MSD.md §1.7: L1 (1000, T1, WF1, 01-01, A=30, B=10), L2 (500, T2, WF1, 01-01, A=20),
    L3 (800, T1, WF2, 01-02, no reject); L1, L2 <- W1 (root WAFER-1); events W1 焊接_WB/M1/E1,
    L1 成型/M2/E2, L2 成型/M3/E3, L1 測試/T1/E9; W1 material P1/PL1 "Gold wire" on DBX.

    L2's detection track-in is an upstream_history row too (both read the WIP history), so
    it uses equipment id E9 like L1's: the distinct EQUIPMENTIDs over J stay E1, E2, E3, E9 (4).
    """
    db = sqlite3.connect(path)
    for sql in schema.create_tables_sql():
        db.execute(sql)
    containers = [("L1", "LOT-1", "PJA"), ("L2", "LOT-2", "PJB"), ("L3", "LOT-3", "PJA"), ("W1", "WAFER-1", None)]
    db.executemany(schema.insert_sql("DW_MES_CONTAINER"), [(c, n, None, None, "WAFER-1", "MO-1", pj, None, None, "PROD",
                                                     "PKG1", "LOT") for c, n, pj in containers])
    db.executemany(schema.insert_sql("DW_MES_WIP"), [("L1", "LOT-1", "WF1", "PKG1"), ("L2", "LOT-2", "WF1", "PKG1"),
                                                    ("L3", "LOT-3", "WF2", "PKG1")])
    db.executemany(schema.insert_sql("DW_MES_LOTWIPHISTORY"), [
        _wip("L1", "TMTT", "E9", "T1", "2025-01-01 10:00:00", 1000),
        _wip("L2", "TMTT", "E9", "T2", "2025-01-01 11:00:00", 500),
        _wip("L3", "TMTT", "E7", "T1", "2025-01-02 10:00:00", 800),
        _wip("W1", "焊接_WB", "E1", "M1", "2024-12-28 08:00:00", 2000),
        _wip("L1", "成型", "E2", "M2", "2024-12-30 08:00:00", 1000),
        _wip("L2", "成型", "E3", "M3", "2024-12-30 09:00:00", 500),
    ])
    db.executemany(schema.insert_sql("DW_MES_LOTREJECTHISTORY"), [
        (cid, "TMTT", "SPEC-TMTT", reason, "T1", None, qty, 0, 0, 0, 0, 0, "2025-01-01 12:00:00")
        for cid, reason, qty in (("L1", "A", 30), ("L1", "B", 10), ("L2", "A", 20))])
    db.execute(schema.insert_sql("DW_MES_LOTMATERIALSHISTORY"),
               ("W1", "P1", "PL1", 5, "焊接_WB", "SPEC-WB", "DBX", "2024-12-28 09:00:00", "Gold wire"))
    db.commit()
    db.close()
    return path


def example_body(params=None, lineage=EXAMPLE_LINEAGE) -> dict:
    body = {"profile": "mid_section_defect", "container_ids": ["L1", "L2", "L3"],
            "seed_container_ids": ["L1", "L2", "L3"], "domains": ["upstream_history", "materials"],
            "params": {**EXAMPLE_PARAMS, **(params or {})}}
    if lineage is not None:
        body["lineage"] = lineage
    return body


def run_job(supervisor, db: Path, body: dict, chunk_cids: int, processes: int = 2, user: str = "alice",
            timeout_s: float = 60):
    """Submit ``body`` as an MSD job on fresh workers; return (service, job id, final status)."""
    svc, env = trace_service(db, TRACE_CHUNK_CIDS=str(chunk_cids), TRACE_JOB_MAX_INFLIGHT_UNITS="4")
    sup = start_workers(supervisor, svc, env, processes=processes)
    job_id = svc.submit(svc.parse(body, user))
    return svc, sup, job_id, wait_final(sup, svc, job_id, timeout_s)


def aggregation_of(svc, job_id: str) -> dict:
    return msdplan.unpack(svc.store.get_artifact(job_id, "aggregation"))


def library_aggregation(db: Path, body: dict) -> dict:
    """The aggregation computed in one process over all rows: one detection chunk, one unit per domain."""
    source = SqliteSource(db)
    try:
        req = msdplan.parse(body, body["domains"], "x")
        lineage = msdplan.resolve_lineage(req, None, lambda: SqliteSource(db))
        p = req.params
        dates = {} if req.container_mode else {"start_date": p.start_date, "end_date": p.end_date}
        cids = msdplan.fetch_set(req, lineage) if req.container_mode else req.seeds
        rows, columns = [], None
        for columns, batch in MsdReads(source).detect_by_cids(list(p.stations), cids, 5000, **dates):
            rows.extend(batch)
        if p.direction == "forward":
            det = msd.fold_detection(p, rows, columns)
        else:
            det = msd.fold_detection(p, rows, columns, msd.wafer_roots(lineage["ancestors"], lineage["seed_roots"]))
        items = msdplan.fetch_set(req, lineage)
        parts = [det]
        if p.direction == "forward":
            defect = msd.defective_lots(det)
            ctx = msd.forward_context(items, msd.forward_seed_map(req.seeds, lineage["children_map"], defect), defect)
        else:
            anc = {s: v for s, v in lineage["ancestors"].items() if s in set(req.seeds)}
            ctx = msd_reference.backward_context(items, anc, msd.defective_lots(det))
        for domain in req.domains:
            parts.append(msd.fold(ctx, p.direction, list(source.fetch(domain, items, 5000))))
        return msd.finalize(msd.merge_all(p.direction, parts), p, trace_query_id=req.trace_query_id)
    finally:
        source.close()


def library_detail_rows(db: Path, body: dict) -> list[dict]:
    """Every backward detail row (no read-time filter) computed in one process over all rows."""
    source = SqliteSource(db)
    try:
        req = msdplan.parse(body, body["domains"], "x")
        lineage = msdplan.resolve_lineage(req, None, lambda: SqliteSource(db))
        p = req.params
        rows, columns = [], None
        for columns, batch in MsdReads(source).detect_by_cids(list(p.stations), req.seeds, 5000,
                                                    start_date=p.start_date, end_date=p.end_date):
            rows.extend(batch)
        items = msdplan.fetch_set(req, lineage)
        anc = {s: v for s, v in lineage["ancestors"].items() if s in set(req.seeds)}
        ctx = msd_reference.backward_context(items, anc, req.seeds)
        batches = [b for d in req.domains for b in source.fetch(d, items, 5000)]
        upstream = msd_reference.fold_lot_upstream(ctx, batches)
        return msd_reference.backward_detail_rows(msd.MsdParams(), rows, upstream, anc, lineage["names"], columns)
    finally:
        source.close()
