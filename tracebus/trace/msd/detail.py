"""Per-lot detail rows of MSD.md §3 (the detail endpoint and the CSV export), as pure functions.

What the detail endpoint needs per lot, beyond the detection rows of that lot:

* forward — for each defect lot, *its own* (not re-keyed) downstream rows: the groups reached
  and the reject quantity per group (:func:`fold_lot_downstream`), filtered by the station
  order only when the rows are built (:func:`forward_detail_rows`), since that order is known
  only after detection;
* backward — the lot's upstream sets over its lineage (self row included, **no** station
  filter): the job keeps one record per lineage node (:mod:`.lots`) and unions a lot's nodes
  when its row is read (:mod:`tracebus.trace.msd.job.detailrows`); the per-lot fold it is
  tested against is in the tests (tests/msd_reference.py).

These per-lot records can be stored per lot (e.g. in Redis) and joined with the detection rows
of the lots on a page.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from tracebus.trace.domains import NO_SEQUENCE
from tracebus.trace.msd._util import getter, num, rate_pct, text, to_int
from tracebus.trace.msd.detection import DETECTION_COLUMNS, in_numerator, in_population
from tracebus.trace.msd.params import MsdParams, group_order


def _masked(params: MsdParams, get, detection_rows: Iterable[Any]):
    """``(cid, row, reason, qty)`` of the detection rows in the population and the numerator."""
    for row in detection_rows:
        reason, qty = get(row, "LOSSREASONNAME"), num(get(row, "REJECTQTY"))
        if get(row, "CONTAINERID") is None or not in_population(params, get, row) \
                or not in_numerator(params, reason, qty):
            continue
        yield text(get(row, "CONTAINERID")), row, reason, qty


def fold_lot_downstream(context: Mapping[str, Any], batches) -> dict:
    """Per defect lot (its own CID, no re-key): ``{cid: {"g": [groups reached], "r": {group: qty}}}``."""
    own = set(context.get("self", ()))
    out: dict[str, dict] = {}
    for columns, rows in batches:
        get = getter(columns)
        for row in rows:
            cid, group = text(get(row, "CONTAINERID")), text(get(row, "WORKCENTER_GROUP")).strip()
            if cid not in own or not group:
                continue
            rec = out.setdefault(cid, {"g": set(), "r": {}})
            if (num(get(row, "TRACKINQTY")) or 0) > 0:
                rec["g"].add(group)
            reject = num(get(row, "REJECT_TOTAL_QTY")) or 0
            if reject > 0:
                rec["g"].add(group)
                rec["r"][group] = rec["r"].get(group, 0) + int(reject)
    return {cid: {"g": sorted(r["g"]), "r": r["r"]} for cid, r in out.items()}


def forward_detail_rows(params: MsdParams, detection_rows: Iterable[Any],
                        lot_downstream: Mapping[str, Mapping[str, Any]], station_order: int = NO_SEQUENCE,
                        columns: Sequence[str] | None = None) -> list[dict]:
    """Forward detail rows, one per defect lot of ``detection_rows`` (mask F, REJECTQTY > 0)."""
    get = getter(columns or DETECTION_COLUMNS)
    lots: dict[str, dict] = {}
    for cid, row, reason, qty in _masked(params, get, detection_rows):
        lot = lots.setdefault(cid, {"row": row, "d": 0, "r": {}, "defect": False})
        if qty is not None and qty > 0:
            lot["defect"] = True
            lot["d"] += to_int(qty)
            if text(reason):
                lot["r"][text(reason)] = lot["r"].get(text(reason), 0) + to_int(qty)
    out = []
    for cid, lot in lots.items():
        if not lot["defect"]:
            continue
        row, down = lot["row"], lot_downstream.get(cid, {})
        groups = [g for g in down.get("g", ()) if group_order(g) > station_order]
        rejects = {g: q for g, q in down.get("r", {}).items() if group_order(g) > station_order}
        total, inp = sum(rejects.values()), to_int(get(row, "TRACKINQTY"))
        out.append({
            **{c: text(get(row, c)) for c in ("CONTAINERNAME", "PJ_TYPE", "PRODUCTLINENAME", "WORKFLOW",
                                              "DETECTION_EQUIPMENTNAME")},
            "TRACKINQTY": inp, "DEFECT_QTY": lot["d"], "DOWNSTREAM_STATIONS_REACHED": len(groups),
            "DOWNSTREAM_TOTAL_REJECT": total, "DOWNSTREAM_REJECT_RATE": rate_pct(total, inp),
            "WORST_DOWNSTREAM_STATION": min(rejects.items(), key=lambda kv: (-kv[1], kv[0]))[0] if rejects else "",
            "DETECTION_LOSS_REASON": min(lot["r"].items(), key=lambda kv: (-kv[1], kv[0]))[0] if lot["r"] else None,
        })
    return out
