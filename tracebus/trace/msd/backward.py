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


def _attribution(mach, upstream, lot_values, families: Mapping[str, str]) -> list[dict]:
    def name_of(parts):
        group, name, eq_id = parts
        if upstream is not None and group not in upstream:
            return None
        return (group.strip() or UNKNOWN, name, eq_id)

    cells = _group_by(mach, name_of, lot_values)
    out = []
    for (group, name, eq_id), c in sorted(cells.items(), key=lambda kv: (-kv[1]["d"], kv[0])):
        out.append({"WORKCENTER_GROUP": group, "EQUIPMENT_NAME": name, "EQUIPMENT_ID": eq_id,
                    "RESOURCEFAMILYNAME": families.get(eq_id) or UNKNOWN,
                    "DETECTION_LOT_COUNT": c["n"], "INPUT_QTY": int(c["i"]),
                    "DEFECT_QTY": int(c["d"]), "DEFECT_RATE": rate_pct(int(c["d"]), int(c["i"]))})
    return out


def _materials_attribution(mat, desc, lot_values) -> list[dict]:
    cells = _group_by(mat, tuple, lot_values)
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
                      lineage_available: bool = True, trace_query_id: str = "") -> dict:
    """The backward aggregation dict of §1.4 (without ``domain_quality_meta``, which the job adds)."""
    det, ev = partial.get("det", {}), partial.get("ev", {})
    lot_values = lot_table(det.get("defective", {}))
    upstream = params.upstream_groups
    mach = ev.get("mach", {}) if lineage_available else {}
    mat = ev.get("mat", {}) if lineage_available else {}

    def machine_name(parts):
        return None if upstream is not None and parts[0] not in upstream else parts[1]

    affected = len(ev.get("eqid", {})) if lineage_available else 0
    return {
        "kpi": _kpi(det, affected),
        "charts": {
            "by_machine": _chart(_group_by(mach, machine_name, lot_values)),
            "by_detection_machine": _chart(det.get("det_machine", {})),
            "by_material": _chart(_group_by(mat, lambda p: p[0], lot_values)),
            "by_wafer_root": _chart(det.get("root", {})) if lineage_available else [],
            "by_loss_reason": _loss_reason_chart(det),
            "by_workflow": _chart(det.get("workflow", {})),
        },
        "daily_trend": _daily(det),
        "attribution": _attribution(mach, upstream, lot_values, resource_families or {}),
        "materials_attribution": _materials_attribution(mat, ev.get("desc", {}), lot_values),
        "available_loss_reasons": list(det.get("avail", [])),
        "genealogy_status": "ready",
        "detail_total_count": int(det.get("detail_count", 0)),
        "trace_query_id": trace_query_id,
    }
