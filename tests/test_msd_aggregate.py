"""MSD.md §1.7's worked example, exact numbers, through fold → merge → finalize."""

from __future__ import annotations

from tracebus.trace import msd
from tests.msd_support import aggregate, det_row, material, upstream

DETECTION = [
    det_row("L1", "LOT-1", 1000, "T1", "WF1", "2025-01-01 10:00:00", "A", 30, eq_id="E9"),
    det_row("L1", "LOT-1", 1000, "T1", "WF1", "2025-01-01 10:00:00", "B", 10, eq_id="E9"),
    det_row("L2", "LOT-2", 500, "T2", "WF1", "2025-01-01 11:00:00", "A", 20),
    det_row("L3", "LOT-3", 800, "T1", "WF2", "2025-01-02 09:00:00", None, 0, eq_id="E9"),
]
LINEAGE = {"ancestors": {"L1": ["W1"], "L2": ["W1"], "L3": []},
           "seed_roots": {"L1": "WAFER-1", "L2": "WAFER-1", "L3": "LOT-3"}}
SEEDS = ["L1", "L2", "L3"]
EVENTS = {
    "upstream_history": [
        upstream("W1", "焊接_WB_1", "焊接_WB", "E1", "M1"),
        upstream("L1", "成型", "成型", "E2", "M2"),
        upstream("L2", "成型", "成型", "E3", "M3"),
        upstream("L1", "TMTT", "測試", "E9", "T1"),
    ],
    "materials": [material("W1", "P1", "PL1", "DBX", "Gold wire")],
}


def run(params=None, **kw):
    params = msd.MsdParams.from_params(params or {"station": "測試"})
    return aggregate(params, DETECTION, LINEAGE, SEEDS, EVENTS, trace_query_id="msd-x", **kw)


def item(name, lots, defect, inp, rate, cum):
    return {"name": name, "lot_count": lots, "defect_qty": defect, "input_qty": inp,
            "defect_rate": rate, "cumulative_pct": cum}


def test_kpi_daily_and_detail_count_match_the_worked_example():
    agg = run()
    assert agg["kpi"] == {"total_input": 2300, "lot_count": 3, "defective_lot_count": 2,
                          "total_defect_qty": 60, "total_defect_rate": 2.6087,
                          "top_loss_reason": "A", "affected_machine_count": 4}
    assert agg["daily_trend"] == [
        {"date": "2025-01-01", "defect_qty": 60, "input_qty": 1500, "defect_rate": 4.0},
        {"date": "2025-01-02", "defect_qty": 0, "input_qty": 800, "defect_rate": 0.0}]
    assert agg["detail_total_count"] == 4
    assert agg["available_loss_reasons"] == ["A", "B"]
    assert agg["genealogy_status"] == "ready" and agg["trace_query_id"] == "msd-x"


def test_by_machine_is_limited_to_groups_before_the_station():
    assert run()["charts"]["by_machine"] == [
        item("M1", 2, 60, 1500, 4.0, 50.0), item("M2", 1, 40, 1000, 4.0, 83.33),
        item("M3", 1, 20, 500, 4.0, 100.0)]


def test_by_machine_without_a_known_station_has_no_filter():
    chart = run({"station": "NOWHERE"})["charts"]["by_machine"]
    assert {i["name"]: i["defect_qty"] for i in chart} == {"M1": 60, "DBX": 60, "M2": 40, "T1": 40, "M3": 20}


def test_detection_charts_match_the_worked_example():
    charts = run()["charts"]
    assert charts["by_loss_reason"] == [
        {"name": "A", "defect_qty": 50, "lot_count": 2, "defect_rate": 2.1739, "cumulative_pct": 83.33},
        {"name": "B", "defect_qty": 10, "lot_count": 1, "defect_rate": 0.4348, "cumulative_pct": 100.0}]
    assert charts["by_detection_machine"] == [item("T1", 1, 40, 1000, 4.0, 66.67),
                                              item("T2", 1, 20, 500, 4.0, 100.0)]
    assert charts["by_workflow"] == [item("WF1", 2, 60, 1500, 4.0, 100.0)]
    assert charts["by_wafer_root"] == [item("WAFER-1", 2, 60, 1500, 4.0, 100.0)]
    assert charts["by_material"] == [item("P1", 2, 60, 1500, 4.0, 100.0)]


def test_attribution_lists_carry_ids_families_and_descriptions():
    agg = run(resource_families={"E1": "WB-FAM"})
    assert agg["attribution"][0] == {
        "WORKCENTER_GROUP": "焊接_WB", "EQUIPMENT_NAME": "M1", "EQUIPMENT_ID": "E1",
        "RESOURCEFAMILYNAME": "WB-FAM", "DETECTION_LOT_COUNT": 2, "INPUT_QTY": 1500,
        "DEFECT_QTY": 60, "DEFECT_RATE": 4.0}
    assert [a["EQUIPMENT_NAME"] for a in agg["attribution"]] == ["M1", "M2", "M3"]
    assert agg["attribution"][1]["RESOURCEFAMILYNAME"] == "(未知)"
    assert agg["materials_attribution"] == [{
        "MATERIAL_KEY": "P1 (PL1)", "MATERIAL_PART_NAME": "P1", "MATERIAL_LOT_NAME": "PL1",
        "MATERIAL_PART_DESC": "Gold wire", "DETECTION_LOT_COUNT": 2, "INPUT_QTY": 1500,
        "DEFECT_QTY": 60, "DEFECT_RATE": 4.0}]


def test_loss_reason_a_only_shrinks_the_numerator():
    agg = run({"station": "測試", "loss_reasons": "A"})
    assert agg["kpi"]["total_defect_qty"] == 50
    assert agg["kpi"]["total_defect_rate"] == 2.1739
    assert agg["kpi"]["total_input"] == 2300
    assert agg["detail_total_count"] == 3
    by_machine = {i["name"]: i for i in agg["charts"]["by_machine"]}
    assert (by_machine["M1"]["defect_qty"], by_machine["M1"]["input_qty"], by_machine["M1"]["defect_rate"]) == (50, 1500, 3.3333)
    assert (by_machine["M2"]["defect_qty"], by_machine["M2"]["input_qty"], by_machine["M2"]["defect_rate"]) == (30, 1000, 3.0)


def test_without_lineage_the_lineage_charts_are_empty():
    agg = run(lineage_available=False)
    assert agg["charts"]["by_machine"] == [] and agg["attribution"] == []
    assert agg["charts"]["by_wafer_root"] == [] and agg["kpi"]["affected_machine_count"] == 0


def test_population_mask_applies_to_both_numerator_and_denominator():
    agg = run({"station": "測試", "pj_types": [" PJ "], "packages": ["OTHER"]})
    assert agg["kpi"]["lot_count"] == 0 and agg["kpi"]["total_defect_rate"] == 0.0


def test_lot_sums_packed_and_plain_forms_agree_with_plain_sums():
    from tracebus.trace.msd._util import lot_sums, lot_table

    # Given integer values (the packed one-map form) and values with a float (the plain form)
    whole = {f"L{n}": {"d": n * 7 % 13, "i": 1000 + n} for n in range(50)}
    fractional = {**whole, "L3": {"d": 2.5, "i": 1003}}
    lots = {"L1", "L3", "L17", "L49", "unknown"}
    for values in (whole, fractional):
        table = lot_table(values)
        # Then both forms give the count, Σ defect and Σ input over the known lots only
        want = (4, sum(values[k]["d"] for k in lots - {"unknown"}), sum(values[k]["i"] for k in lots - {"unknown"}))
        assert lot_sums(lots, table) == want == lot_sums(lots, values)
    assert lot_table(whole)[1] is None and lot_table(fractional)[1] is not None
