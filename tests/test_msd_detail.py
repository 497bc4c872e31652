"""Detail rows (MSD.md §3) over the worked example, and the params/ids helpers."""

from __future__ import annotations

from tracebus.trace import msd
from tracebus.trace.msd import detail
from tracebus.trace.msd.partial import merge_data
from tests import msd_reference, test_msd_aggregate as bw, test_msd_forward as fw
from tests.msd_support import columns_of


def test_backward_detail_rows_one_per_lot_and_reason():
    params = msd.MsdParams.from_params({"station": "測試"})
    lots = ["L1", "L2", "L3"]
    up = {}
    for domain, rows in bw.EVENTS.items():
        ctx = msd_reference.backward_context({r[0] for r in rows}, bw.LINEAGE["ancestors"], lots)
        up = merge_data(up, msd_reference.fold_lot_upstream(ctx, [(columns_of(domain), rows)]))
    rows = msd_reference.backward_detail_rows(params, bw.DETECTION, up, bw.LINEAGE["ancestors"], {"W1": "WAFER-1"})
    assert len(rows) == bw.run()["detail_total_count"] == 4
    l1a = next(r for r in rows if r["CONTAINERID"] == "L1" and r["LOSS_REASON"] == "A")
    assert (l1a["DEFECT_QTY"], l1a["DEFECT_RATE"], l1a["ANCESTOR_COUNT"], l1a["WAFER_ROOT"]) == (30, 3.0, 1, "WAFER-1")
    assert l1a["UPSTREAM_MACHINES"] == [{"station": "(未知)", "machine": "DBX"}, {"station": "成型", "machine": "M2"},
                                        {"station": "測試", "machine": "T1"}, {"station": "焊接_WB", "machine": "M1"}]
    assert l1a["UPSTREAM_MATERIALS"] == [{"part": "P1", "lot": "PL1"}] and l1a["UPSTREAM_MACHINE_COUNT"] == 3
    l3 = [r for r in rows if r["CONTAINERID"] == "L3"]
    assert [(r["LOSS_REASON"], r["DEFECT_QTY"], r["ANCESTOR_COUNT"], r["UPSTREAM_MACHINES"]) for r in l3] == [("", 0, 0, [])]


def test_forward_detail_rows_use_the_lots_own_rows():
    params = msd.MsdParams.from_params({"station": "成型", "direction": "forward"})
    ctx = msd.forward_context({"F1", "F2", "F3", "C1", "C2"}, {}, ["F1", "F2"])
    down = {}
    for domain, rows in fw.EVENTS.items():
        down = merge_data(down, detail.fold_lot_downstream(ctx, [(columns_of(domain), rows)]))
    rows = {r["CONTAINERNAME"]: r for r in detail.forward_detail_rows(params, fw.DETECTION, down, 4)}
    assert set(rows) == {"LOT-F1", "LOT-F2"}
    assert rows["LOT-F1"] == {
        "CONTAINERNAME": "LOT-F1", "PJ_TYPE": "PJ", "PRODUCTLINENAME": "PKG", "WORKFLOW": "WF",
        "DETECTION_EQUIPMENTNAME": "X1", "TRACKINQTY": 100, "DEFECT_QTY": 8,
        "DOWNSTREAM_STATIONS_REACHED": 2, "DOWNSTREAM_TOTAL_REJECT": 2, "DOWNSTREAM_REJECT_RATE": 2.0,
        "WORST_DOWNSTREAM_STATION": "電鍍", "DETECTION_LOSS_REASON": "A"}


def test_params_normalise_like_the_original():
    p = msd.MsdParams.from_params({"station": "測試, 成型,測試", "loss_reasons": " A, B ,A,",
                                   "pj_types": [" x ", ""], "packages": "not-a-list"})
    assert p.stations == ("成型", "測試") and p.station_order == 4
    assert p.loss_reasons == ("A", "B") and p.pj_types == ("x",) and p.packages is None
    assert p.upstream_groups == {"切割", "焊接_DB", "焊接_WB", "焊接_DW"}
    assert msd.MsdParams.from_params({}).stations == ("測試",)
    assert msd.MsdParams.from_params({"station": "TMTT"}).upstream_groups is None


def test_ids_are_stable_hashes():
    a = msd.trace_query_id("mid_section_defect", ["B", "A"], station="測試", direction="backward")
    assert a == msd.trace_query_id("mid_section_defect", ["A", "B"], station="測試", direction="backward")
    assert a.startswith("msd-") and len(a) == 20
    assert msd.detection_hash("2025-01-01", "2025-01-31", ["測試", "成型"]) == \
        msd.detection_hash("2025-01-01", "2025-01-31", ["成型", "測試"])
