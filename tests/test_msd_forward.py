"""A forward example computed by hand (MSD.md §1.5), through fold → merge → finalize.

Detection at 成型 (order 4): F1 input 100, X1, 03-01, A=5 B=3; F2 input 200, X2, 03-01, A=10;
F3 input 300, X1, 03-02, no reject. Forward lineage F1 → C1 → C2. Defect lots F1, F2, so the
re-key is F1/C1/C2 → F1 and F2 → F2; F3 is ignored downstream.
Downstream groups are those with order > 4: 電鍍 (7) and 測試 (11); 焊接_WB (2) is dropped.
"""

from __future__ import annotations

from tracebus.trace import msd
from tests.msd_support import aggregate, det_row, downstream, upstream

DETECTION = [
    det_row("F1", "LOT-F1", 100, "X1", "WF", "2025-03-01 08:00:00", "A", 5, workcenter="成型"),
    det_row("F1", "LOT-F1", 100, "X1", "WF", "2025-03-01 08:00:00", "B", 3, workcenter="成型"),
    det_row("F2", "LOT-F2", 200, "X2", "WF", "2025-03-01 09:00:00", "A", 10, workcenter="成型"),
    det_row("F3", "LOT-F3", 300, "X1", "WF", "2025-03-02 09:00:00", None, 0, workcenter="成型"),
]
LINEAGE = {"children_map": {"F1": ["C1"], "C1": ["C2"]}}
SEEDS = ["F1", "F2", "F3"]
EVENTS = {
    "upstream_history": [
        upstream("C1", "電鍍", "電鍍", "E", "P1", ts="2025-03-03 08:00:00", qty=90),
        upstream("F2", "電鍍", "電鍍", "E", "P2", ts="2025-03-03 08:00:00", qty=200),
        upstream("F1", "TMTT", "測試", "E", "Q1", ts="2025-03-04 08:00:00", qty=100),
        upstream("F1", "焊接_WB", "焊接_WB", "E", "Z", ts="2025-02-28 08:00:00", qty=100),
        upstream("F3", "電鍍", "電鍍", "E", "P1", ts="2025-03-03 08:00:00", qty=300),
    ],
    "downstream_rejects": [
        downstream("C2", "測試", "OPEN", "Q1", 6, "2025-03-04"),
        downstream("F2", "電鍍", "A", "P2", 4, "2025-03-03"),
        downstream("F1", "電鍍", None, None, 2, "2025-03-03"),
    ],
}


def run():
    params = msd.MsdParams.from_params({"station": "成型", "direction": "forward"})
    return aggregate(params, DETECTION, LINEAGE, SEEDS, EVENTS, trace_query_id="msd-f")


def test_forward_kpi_and_detection_parts():
    agg = run()
    # downstream: 電鍍 input 90 (C1→F1) + 200 (F2), reject 4 + 2; 測試 input 100, reject 6.
    # rate 12 / 390 = 3.0769 %
    assert agg["kpi"] == {"detection_lot_count": 3, "detection_defect_qty": 18, "tracked_lot_count": 3,
                          "downstream_stations_reached": 2, "downstream_total_reject": 12,
                          "downstream_reject_rate": 3.0769}
    assert agg["detail_total_count"] == 3 and agg["available_loss_reasons"] == ["A", "B"]
    # 03-01: input 100 + 200, defect 5 + 3 + 10 = 18 → 6 %; 03-02: F3 only
    assert agg["daily_trend"] == [
        {"date": "2025-03-01", "input_qty": 300, "defect_qty": 18, "defect_rate": 6.0},
        {"date": "2025-03-02", "input_qty": 300, "defect_qty": 0, "defect_rate": 0.0}]
    # A: 15 over F1+F2 (input 300) = 0.05; B: 3 over F1 (100) = 0.03 — fractions
    assert agg["by_detection_loss_reason"] == [
        {"loss_reason": "A", "reject_qty": 15, "input_qty": 300, "lot_count": 2, "reject_rate": 0.05},
        {"loss_reason": "B", "reject_qty": 3, "input_qty": 100, "lot_count": 1, "reject_rate": 0.03}]
    # det: 18/600 = 0.03; downstream 12/390 = 0.0307692 → 1.025641
    assert agg["amplification"] == 1.025641


def test_forward_charts():
    charts = run()["charts"]
    # 測試 and 電鍍 tie on 6: the name breaks the tie (測 U+6E2C < 電 U+96FB)
    assert charts["by_downstream_station"] == [
        {"name": "測試", "input_qty": 100, "defect_qty": 6, "defect_rate": 6.0, "lot_count": 1, "cumulative_pct": 50.0},
        {"name": "電鍍", "input_qty": 290, "defect_qty": 6, "defect_rate": 2.069, "lot_count": 2, "cumulative_pct": 100.0}]
    assert charts["by_downstream_machine"] == [
        {"name": "Q1", "input_qty": 100, "defect_qty": 6, "defect_rate": 6.0, "cumulative_pct": 50.0},
        {"name": "P2", "input_qty": 200, "defect_qty": 4, "defect_rate": 2.0, "cumulative_pct": 83.33},
        {"name": "(NA)", "input_qty": 0, "defect_qty": 2, "defect_rate": 0.0, "cumulative_pct": 100.0},
        {"name": "P1", "input_qty": 90, "defect_qty": 0, "defect_rate": 0.0, "cumulative_pct": 100.0}]
    assert charts["by_downstream_loss_reason"] == [
        {"name": "OPEN", "defect_qty": 6, "cumulative_pct": 50.0},
        {"name": "A", "defect_qty": 4, "cumulative_pct": 83.33},
        {"name": "(未填寫)", "defect_qty": 2, "cumulative_pct": 100.0}]
    # X1: F1 + F3 (input 400, defect 8); X2: F2 (200, 10)
    assert charts["by_detection_machine"] == [
        {"name": "X2", "input_qty": 200, "defect_qty": 10, "defect_rate": 5.0, "lot_count": 1, "cumulative_pct": 55.56},
        {"name": "X1", "input_qty": 400, "defect_qty": 8, "defect_rate": 2.0, "lot_count": 2, "cumulative_pct": 100.0}]


def test_forward_crosstab_trend_and_matrix():
    agg = run()
    # only downstream reason "A" is on the detection-reason axis: 電鍍 A 4 / input 290
    assert agg["loss_reason_workcenter_crosstab"] == {
        "loss_reasons": ["A", "B"], "workcenter_groups": ["測試", "電鍍"],
        "cells": [{"loss_reason": "A", "workcenter_group": "電鍍", "reject_qty": 4, "reject_rate": 0.013793}]}
    # defect CIDs' own rows only: 03-03 input 200 (F2), rejects 4 + 2; 03-04 input 100 (F1)
    assert agg["downstream_trend"] == [{"date": "2025-03-03", "reject_qty": 6, "reject_rate": 0.03},
                                       {"date": "2025-03-04", "reject_qty": 0, "reject_rate": 0.0}]
    # F1 (A, B) gets OPEN 6 (via C2) and (未填寫) 2; F2 (A) gets A 4
    assert agg["by_front_downstream_reason_matrix"] == {
        "rows": [{"name": "A", "total": 12}, {"name": "B", "total": 8}],
        "cols": [{"name": "OPEN", "total": 12}, {"name": "(未填寫)", "total": 4}, {"name": "A", "total": 4}],
        "cells": [[6, 2, 4], [6, 2, 0]],
        "row_pct": [[50.0, 16.67, 33.33], [75.0, 25.0, 0.0]]}
