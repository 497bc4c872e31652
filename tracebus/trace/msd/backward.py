"""Finalize a merged backward partial into the aggregation of MSD.md §1.4.

Runs once per job over the merged partial: it joins each key's lot set with the defective lots'
lot_defect / lot_input (summed once per lot, the global dedup of §1.8), then applies the top-10
selection, cumulative_pct, every rate and the RESOURCEFAMILYNAME lookup.
"""

from __future__ import annotations

from typing import Any, Mapping

from tracebus.trace.msd._util import UNKNOWN, add_cumulative, lot_sums, lot_table, pareto, rate_pct, unkey
from tracebus.trace.msd.params import MsdParams


def _chart(cells: Mapping[str, Mapping[str, int]]) -> list[dict]:
    return pareto((name, c["n"], c["d"], c["i"]) for name, c in cells.items())


def _kpi(det: Mapping[str, Any], affected: int) -> dict:
    reasons = det.get("reason_sum", {})
    top = min(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0] if reasons else ""
    total_input, defect = int(det.get("input", 0)), int(det.get("defect", 0))
    return {"total_input": total_input, "lot_count": int(det.get("lots", 0)),
            "defective_lot_count": int(det.get("dlots", 0)), "total_defect_qty": defect,
            "total_defect_rate": rate_pct(defect, total_input) if total_input > 0 else 0.0,
            "top_loss_reason": top, "affected_machine_count": affected}


def _daily(det: Mapping[str, Any]) -> list[dict]:
    out = []
    for day, c in sorted(det.get("daily", {}).items()):
        d, i = int(c["d"]), int(c["i"])
        out.append({"date": day, "defect_qty": d, "input_qty": i, "defect_rate": rate_pct(d, i)})
    return out


def _loss_reason_chart(det: Mapping[str, Any]) -> list[dict]:
    total_input = int(det.get("d_input", 0))
    ranked = sorted(det.get("by_reason", {}).items(), key=lambda kv: (-kv[1]["d"], kv[0]))[:10]
    items = [{"name": r, "defect_qty": int(c["d"]), "lot_count": int(c["n"]),
              "defect_rate": rate_pct(int(c["d"]), total_input)} for r, c in ranked]
    return add_cumulative(items)


def _group_by(sets: Mapping[str, list], name_of, lot_values) -> dict[str, dict]:
    """Union the lot sets of every stored key that maps to the same output key, then sum once."""
    unions: dict[Any, set] = {}
    for k, lots in sets.items():
        out_key = name_of(unkey(k))
        if out_key is not None:
            unions.setdefault(out_key, set()).update(lots)
    cells = {}
    for out_key, lots in unions.items():
        n, d, i = lot_sums(lots, lot_values)
        if n:
            cells[out_key] = {"n": n, "d": d, "i": i}
    return cells


def key_cells(ev: Mapping[str, Any], upstream, lot_values) -> dict[str, dict]:
    """The lot-set part of the finalize: per output key ``{n, d, i}`` of by_machine (name),
    by_material (part), attribution (group, name, id) and materials_attribution (part, lot).

    Every output key depends only on the stored keys with the same machine name (``mach``) or
    part (``mat``), so a job may compute this per bucket of names / parts and union the cells
    (:func:`finalize_backward`'s ``cells``).

    Args:
        ev: the events part of a merged partial (only ``mach`` and ``mat`` are read).
        upstream: :attr:`MsdParams.upstream_groups`.
        lot_values: ``det.defective`` or its :func:`._util.lot_table`.
    """
    if not isinstance(lot_values, tuple):
        lot_values = lot_table(lot_values)
    mach, mat = ev.get("mach", {}), ev.get("mat", {})

    def machine_name(parts):
        return None if upstream is not None and parts[0] not in upstream else parts[1]

    def attribution_key(parts):
        group, name, eq_id = parts
        if upstream is not None and group not in upstream:
            return None
        return (group.strip() or UNKNOWN, name, eq_id)

    return {"machine": _group_by(mach, machine_name, lot_values),
            "material": _group_by(mat, lambda p: p[0], lot_values),
            "attr": _group_by(mach, attribution_key, lot_values),
            "mattr": _group_by(mat, tuple, lot_values)}


def _attribution(cells, families: Mapping[str, str]) -> list[dict]:
    out = []
    for (group, name, eq_id), c in sorted(cells.items(), key=lambda kv: (-kv[1]["d"], kv[0])):
        out.append({"WORKCENTER_GROUP": group, "EQUIPMENT_NAME": name, "EQUIPMENT_ID": eq_id,
                    "RESOURCEFAMILYNAME": families.get(eq_id) or UNKNOWN,
                    "DETECTION_LOT_COUNT": c["n"], "INPUT_QTY": int(c["i"]),
                    "DEFECT_QTY": int(c["d"]), "DEFECT_RATE": rate_pct(int(c["d"]), int(c["i"]))})
    return out


def _materials_attribution(cells, desc) -> list[dict]:
    out = []
    for (part, lot), c in sorted(cells.items(), key=lambda kv: (-kv[1]["d"], kv[0])):
        out.append({"MATERIAL_KEY": f"{part} ({lot})" if lot else part, "MATERIAL_PART_NAME": part,
                    "MATERIAL_LOT_NAME": lot,
                    "MATERIAL_PART_DESC": desc.get("\x1f".join((part, lot)), ""),
                    "DETECTION_LOT_COUNT": c["n"], "INPUT_QTY": int(c["i"]),
                    "DEFECT_QTY": int(c["d"]), "DEFECT_RATE": rate_pct(int(c["d"]), int(c["i"]))})
    return out


def finalize_backward(partial: Mapping[str, Any], params: MsdParams, *,
                      resource_families: Mapping[str, str] | None = None,
                      lineage_available: bool = True, trace_query_id: str = "",
                      cells: Mapping[str, dict] | None = None) -> dict:
    """The backward aggregation dict of §1.4 (without ``domain_quality_meta``, which the job adds).

    ``cells``: :func:`key_cells` computed already (e.g. per bucket by a job); then the partial's
    ``ev`` needs only ``eqid`` and ``desc``.
    """
    det, ev = partial.get("det", {}), partial.get("ev", {})
    if cells is None:
        cells = key_cells(ev, params.upstream_groups, det.get("defective", {}))
    if not lineage_available:
        cells = {"machine": {}, "material": {}, "attr": {}, "mattr": {}}
    affected = len(ev.get("eqid", {})) if lineage_available else 0
    return {
        "kpi": _kpi(det, affected),
        "charts": {
            "by_machine": _chart(cells["machine"]),
            "by_detection_machine": _chart(det.get("det_machine", {})),
            "by_material": _chart(cells["material"]),
            "by_wafer_root": _chart(det.get("root", {})) if lineage_available else [],
            "by_loss_reason": _loss_reason_chart(det),
            "by_workflow": _chart(det.get("workflow", {})),
        },
        "daily_trend": _daily(det),
        "attribution": _attribution(cells["attr"], resource_families or {}),
        "materials_attribution": _materials_attribution(cells["mattr"], ev.get("desc", {})),
        "available_loss_reasons": list(det.get("avail", [])),
        "genealogy_status": "ready",
        "detail_total_count": int(det.get("detail_count", 0)),
        "trace_query_id": trace_query_id,
    }
