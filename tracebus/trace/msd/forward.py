"""Finalize a merged forward partial into the aggregation of MSD.md §1.5.

The group filter (order > detection station order) is applied here, not in the fold, because
the station order is the minimum over *all* detection lots and so is only known once every
detection chunk is merged. Charts keep the top 10 and fold the rest into 其他 where §1.5 says so.
"""

from __future__ import annotations

from typing import Any, Mapping

from tracebus.trace.msd._util import OTHER, TOP_N, add_cumulative, rate_frac, rate_pct
from tracebus.trace.msd.params import MsdParams, group_order


def _desc(items, value):
    return sorted(items, key=lambda kv: (-value(kv[1]), kv[0]))


def _station_order(det, params: MsdParams) -> int:
    orders = det.get("orders", [])
    return min(orders) if orders else params.station_order


def _forward_attr(ev, order: int) -> dict[str, dict]:
    return {g: a for g, a in ev.get("attr", {}).items() if group_order(g) > order}


def _kpi(det, attr) -> dict:
    rej = sum(a["r"] for a in attr.values())
    inp = sum(a["i"] for a in attr.values())
    return {"detection_lot_count": det.get("lots", 0), "detection_defect_qty": det.get("defect", 0),
            "tracked_lot_count": det.get("lots", 0), "downstream_stations_reached": len(attr),
            "downstream_total_reject": rej, "downstream_reject_rate": rate_pct(rej, inp)}


def _fold_other(items: list[dict], fields: tuple[str, ...], rate: bool) -> list[dict]:
    if len(items) <= TOP_N:
        return items
    rest = items[TOP_N:]
    other = {"name": OTHER, **{f: sum(i[f] for i in rest) for f in fields}}
    if rate:
        other["defect_rate"] = rate_pct(other["defect_qty"], other["input_qty"])
        other = {k: other[k] for k in ("name", "input_qty", "defect_qty", "defect_rate", *fields)
                 if k in other}
    return items[:TOP_N] + [other]


def _charts(det, attr) -> dict:
    stations = [{"name": g, "input_qty": a["i"], "defect_qty": a["r"],
                 "defect_rate": rate_pct(a["r"], a["i"]), "lot_count": len(a["lots"])}
                for g, a in _desc(attr.items(), lambda a: a["r"])]
    machines: dict[str, dict] = {}
    reasons: dict[str, int] = {}
    for a in attr.values():
        for eq, m in a["m"].items():
            cell = machines.setdefault(eq, {"i": 0, "r": 0})
            cell["i"] += m["i"]
            cell["r"] += m["r"]
        for r, q in a["lr"].items():
            reasons[r] = reasons.get(r, 0) + q
    machine_items = [{"name": eq, "input_qty": m["i"], "defect_qty": m["r"],
                      "defect_rate": rate_pct(m["r"], m["i"])}
                     for eq, m in _desc(machines.items(), lambda m: m["r"])]
    reason_items = [{"name": r, "defect_qty": q} for r, q in _desc(reasons.items(), lambda q: q)]
    det_items = [{"name": eq, "input_qty": c["i"], "defect_qty": c["d"],
                  "defect_rate": rate_pct(c["d"], c["i"]), "lot_count": c["n"]}
                 for eq, c in _desc(det.get("det_machine", {}).items(), lambda c: c["d"])]
    return {
        "by_downstream_station": add_cumulative(stations),
        "by_downstream_machine": add_cumulative(_fold_other(machine_items, ("input_qty", "defect_qty"), True)),
        "by_downstream_loss_reason": add_cumulative(_fold_other(reason_items, ("defect_qty",), False)),
        "by_detection_machine": add_cumulative(
            _fold_other(det_items, ("input_qty", "defect_qty", "lot_count"), True)),
    }


def _daily(det) -> list[dict]:
    return [{"date": day, "input_qty": int(c["i"]), "defect_qty": int(c["d"]),
             "defect_rate": rate_pct(int(c["d"]), int(c["i"]))}
            for day, c in sorted(det.get("daily", {}).items())]


def _by_detection_loss_reason(lots: Mapping[str, dict]) -> list[dict]:
    qty: dict[str, int] = {}
    members: dict[str, set] = {}
    for cid, lot in lots.items():
        for r, q in lot["r"].items():
            if r and q > 0:
                qty[r] = qty.get(r, 0) + q
                members.setdefault(r, set()).add(cid)
    ranked = _desc(qty.items(), lambda q: q)
    items = []
    for reason, q in ranked[:TOP_N]:
        inp = sum(lots[c]["i"] for c in members[reason])
        items.append({"loss_reason": reason, "reject_qty": q, "input_qty": inp,
                      "lot_count": len(members[reason]), "reject_rate": rate_frac(q, inp)})
    other_qty = sum(q for _, q in ranked[TOP_N:])
    if other_qty > 0:
        other_lots = set().union(*(members[r] for r, _ in ranked[TOP_N:]))
        inp = sum(lots[c]["i"] for c in other_lots)
        items.append({"loss_reason": OTHER, "reject_qty": other_qty, "input_qty": inp,
                      "lot_count": len(other_lots), "reject_rate": rate_frac(other_qty, inp)})
    return items


def _crosstab(lots: Mapping[str, dict], attr) -> dict:
    qty: dict[str, int] = {}
    for lot in lots.values():
        for r, q in lot["r"].items():
            qty[r] = qty.get(r, 0) + q
    reasons = [r for r, _ in _desc(qty.items(), lambda q: q)]
    stations = [g for g, _ in _desc(attr.items(), lambda a: a["r"])]
    top_r, top_s = set(reasons[:TOP_N]), set(stations[:TOP_N])
    other_r, other_s = len(reasons) > TOP_N, len(stations) > TOP_N
    station_input = {g: attr[g]["i"] for g in stations[:TOP_N]}
    if other_s:
        station_input[OTHER] = sum(attr[g]["i"] for g in stations[TOP_N:])
    cells: dict[tuple, int] = {}
    for g in stations:
        s_key = g if g in top_s else (OTHER if other_s else None)
        for r, q in attr[g]["lr"].items():
            r_key = r if r in top_r else (OTHER if other_r else None)
            if s_key is not None and r_key is not None:
                cells[(r_key, s_key)] = cells.get((r_key, s_key), 0) + q
    return {
        "loss_reasons": reasons[:TOP_N] + ([OTHER] if other_r else []),
        "workcenter_groups": stations[:TOP_N] + ([OTHER] if other_s else []),
        "cells": [{"loss_reason": r, "workcenter_group": s, "reject_qty": q,
                   "reject_rate": rate_frac(q, station_input.get(s, 0))}
                  for (r, s), q in sorted(cells.items()) if q != 0],
    }


def _trend(ev, order: int) -> list[dict]:
    days: dict[str, list] = {}
    for g, per_day in ev.get("trend", {}).items():
        if group_order(g) <= order:
            continue
        for day, c in per_day.items():
            cell = days.setdefault(day, [0, 0])
            cell[0] += c["i"]
            cell[1] += c["r"]
    return [{"date": d, "reject_qty": r, "reject_rate": rate_frac(r, i)}
            for d, (i, r) in sorted(days.items())]


def _front_downstream(ev, order: int, lots: Mapping[str, dict]) -> dict[str, dict[str, int]]:
    """``{front reason: {downstream reason: reject qty}}``: each seed's downstream rejects at the
    stations after ``order``, counted under every detection reason the seed was rejected for."""
    matrix: dict[str, dict[str, int]] = {}
    for g, per_seed in ev.get("matrix", {}).items():
        if group_order(g) <= order:
            continue
        for seed, per_reason in per_seed.items():
            front = [r for r, q in lots.get(seed, {}).get("r", {}).items() if r and q > 0]
            for fr in front:
                row = matrix.setdefault(fr, {})
                for ds, q in per_reason.items():
                    row[ds] = row.get(ds, 0) + q
    return matrix


def _matrix(ev, order: int, lots: Mapping[str, dict]) -> dict:
    matrix = _front_downstream(ev, order, lots)
    if not matrix:
        return {"rows": [], "cols": [], "cells": [], "row_pct": []}
    row_tot = {fr: sum(c.values()) for fr, c in matrix.items()}
    col_tot: dict[str, int] = {}
    for c in matrix.values():
        for ds, q in c.items():
            col_tot[ds] = col_tot.get(ds, 0) + q
    rows = [r for r, _ in _desc(row_tot.items(), lambda q: q)]
    cols = [c for c, _ in _desc(col_tot.items(), lambda q: q)]
    row_groups = [[r] for r in rows[:TOP_N]] + ([rows[TOP_N:]] if rows[TOP_N:] else [])
    col_other = set(cols[TOP_N:])

    def vector(frs):
        vec = [sum(matrix[fr].get(c, 0) for fr in frs) for c in cols[:TOP_N]]
        if col_other:
            vec.append(sum(q for fr in frs for c, q in matrix[fr].items() if c in col_other))
        return vec

    cells = [vector(frs) for frs in row_groups]
    names_r = rows[:TOP_N] + ([OTHER] if rows[TOP_N:] else [])
    names_c = cols[:TOP_N] + ([OTHER] if col_other else [])
    return {"rows": [{"name": n, "total": sum(cells[i])} for i, n in enumerate(names_r)],
            "cols": [{"name": n, "total": sum(v[j] for v in cells)} for j, n in enumerate(names_c)],
            "cells": cells,
            "row_pct": [[round(v / sum(vec) * 100, 2) if sum(vec) else 0.0 for v in vec] for vec in cells]}


def _amplification(det, attr) -> float | None:
    det_rate = det.get("defect", 0) / det["input"] if det.get("input") else 0.0
    if det_rate == 0:
        return None
    inp = sum(a["i"] for a in attr.values())
    down = sum(a["r"] for a in attr.values()) / inp if inp else 0.0
    return round(down / det_rate, 6)


def finalize_forward(partial: Mapping[str, Any], params: MsdParams, *, trace_query_id: str = "") -> dict:
    """The forward aggregation dict of §1.5 (without ``domain_quality_meta``)."""
    det, ev = partial.get("det", {}), partial.get("ev", {})
    order = _station_order(det, params)
    attr = _forward_attr(ev, order)
    lots = det.get("defective", {})
    return {
        "kpi": _kpi(det, attr),
        "charts": _charts(det, attr),
        "daily_trend": _daily(det),
        "available_loss_reasons": list(det.get("avail", [])),
        "genealogy_status": "ready",
        "detail_total_count": det.get("lots", 0),
        "trace_query_id": trace_query_id,
        "by_detection_loss_reason": _by_detection_loss_reason(lots),
        "loss_reason_workcenter_crosstab": _crosstab(lots, attr),
        "downstream_trend": _trend(ev, order),
        "by_front_downstream_reason_matrix": _matrix(ev, order, lots),
        "amplification": _amplification(det, attr),
    }
