"""Per-lot detail rows of MSD.md §3 (the detail endpoint and the CSV export), as pure functions.

What the detail endpoint needs per lot, beyond the detection rows of that lot:

* backward — the lot's upstream sets over its lineage (self row included, **no** station
  filter): distinct ``(station, machine)`` pairs, distinct ``(part, lot)`` material pairs and
  distinct non-blank EQUIPMENTIDs; plus from lineage its ancestor count (self excluded) and its
  WAFER_ROOT (names of its ancestors that are not seeds themselves). :func:`fold_lot_upstream`
  builds the first part per unit as mergeable data (same generic merge as the partials);
* forward — for each defect lot, *its own* (not re-keyed) downstream rows: the groups reached
  and the reject quantity per group (:func:`fold_lot_downstream`), filtered by the station
  order only when the rows are built, since that order is known only after detection.

These per-lot records can be stored per lot (e.g. in Redis) and joined with the detection rows
of the lots on a page.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from tracebus.trace.domains import NO_SEQUENCE
from tracebus.trace.msd._util import getter, key, num, rate_pct, text, to_int, unkey, values
from tracebus.trace.msd.detection import DETECTION_COLUMNS, in_numerator, in_population
from tracebus.trace.msd.params import MsdParams, group_order


def fold_lot_upstream(context: Mapping[str, Any], batches) -> dict:
    """Per-lot upstream sets from one backward unit: ``{lot: {"m": [...], "t": [...], "e": [...]}}``.

    Args:
        context: ``{"lots": {ancestor: [lots]}}`` as :func:`.events.backward_context` builds, but
            over every lot wanted in the detail (not only defective ones).
        batches: ``(columns, rows)`` pairs.
    """
    out: dict[str, dict[str, set]] = {}
    for columns, rows in batches:
        fold_lot_upstream_into(out, context, columns, rows)
    return finish_lot_upstream(out)


_UPSTREAM_COLUMNS = ("CONTAINERID", "EQUIPMENTNAME", "MATERIALPARTNAME", "EQUIPMENTID", "WORKCENTER_GROUP",
                     "MATERIALLOTNAME")


def fold_lot_upstream_into(out: dict, context: Mapping[str, Any], columns, rows) -> None:
    """Fold one batch into ``out`` (sets); :func:`fold_lot_upstream` is this per batch, then
    :func:`finish_lot_upstream`."""
    index = context.get("lots", {})
    for cid, machine, part, eq_id, station, mlot in values(columns, rows, _UPSTREAM_COLUMNS):
        lots = index.get(cid if cid.__class__ is str else text(cid))
        if not lots:
            continue
        machine = (machine if machine.__class__ is str else text(machine)).strip()
        part = (part if part.__class__ is str else text(part)).strip()
        eq_id = (eq_id if eq_id.__class__ is str else text(eq_id)).strip()
        if machine:
            machine = key((station if station.__class__ is str else text(station)).strip() or "(未知)", machine)
        if part:
            part = key(part, (mlot if mlot.__class__ is str else text(mlot)).strip())
        for lot in lots:
            rec = out.get(lot)
            if rec is None:
                rec = out[lot] = {"m": set(), "t": set(), "e": set()}
            if machine:
                rec["m"].add(machine)
            if part:
                rec["t"].add(part)
            if eq_id:
                rec["e"].add(eq_id)


def finish_lot_upstream(out: dict) -> dict:
    """The stored form of :func:`fold_lot_upstream_into`'s sets (sorted lists)."""
    return {lot: {k: sorted(v) for k, v in rec.items()} for lot, rec in out.items()}


def _masked(params: MsdParams, get, detection_rows: Iterable[Any]):
    """``(cid, row, reason, qty)`` of the detection rows in the population and the numerator."""
    for row in detection_rows:
        reason, qty = get(row, "LOSSREASONNAME"), num(get(row, "REJECTQTY"))
        if get(row, "CONTAINERID") is None or not in_population(params, get, row) \
                or not in_numerator(params, reason, qty):
            continue
        yield text(get(row, "CONTAINERID")), row, reason, qty


def backward_detail_rows(params: MsdParams, detection_rows: Iterable[Any],
                         lot_upstream: Mapping[str, Mapping[str, list]],
                         ancestors: Mapping[str, Iterable[str]] | None = None,
                         names: Mapping[str, str] | None = None,
                         columns: Sequence[str] | None = None) -> list[dict]:
    """Backward detail rows (one per lot × reason with REJECTQTY > 0, else one with reason "")
    for the lots of ``detection_rows`` that are in mask D, unsorted."""
    get = getter(columns or DETECTION_COLUMNS)
    lots: dict[str, dict] = {}
    for cid, row, reason, qty in _masked(params, get, detection_rows):
        lot = lots.setdefault(cid, {"f": {}, "r": {}})
        for col in ("CONTAINERNAME", "PJ_TYPE", "PRODUCTLINENAME", "WORKFLOW", "FINISHEDRUNCARD",
                    "DETECTION_EQUIPMENTNAME", "TRACKINQTY"):
            v = get(row, col)
            if v is not None and (lot["f"].get(col) is None or v > lot["f"][col]):
                lot["f"][col] = v
        if qty is not None and qty > 0:
            lot["r"][reason] = lot["r"].get(reason, 0) + qty
    ancestors, names = ancestors or {}, names or {}
    seeds = {s for s, v in ancestors.items() if isinstance(v, (list, tuple, set))}
    out = []
    for cid, lot in lots.items():
        up = lot_upstream.get(cid, {})
        anc = {text(a) for a in ancestors.get(cid) or () if text(a)} - {cid}
        roots = sorted({text(names.get(a)).strip() or a for a in anc if a not in seeds})
        inp = lot["f"].get("TRACKINQTY")
        base = {c: lot["f"].get(c) for c in ("CONTAINERNAME", "PJ_TYPE", "PRODUCTLINENAME", "WORKFLOW",
                                              "FINISHEDRUNCARD", "DETECTION_EQUIPMENTNAME")}
        for reason, defect in (lot["r"].items() or [(None, 0)]):
            out.append({"CONTAINERID": cid, **base, "INPUT_QTY": inp, "LOSS_REASON": reason or "",
                        "DEFECT_QTY": defect,
                        "DEFECT_RATE": rate_pct(defect, inp) if inp and inp > 0 else 0.0,
                        "ANCESTOR_COUNT": len(anc), "UPSTREAM_MACHINE_COUNT": len(up.get("e", ())),
                        "UPSTREAM_MACHINES": [dict(zip(("station", "machine"), unkey(k))) for k in up.get("m", ())],
                        "UPSTREAM_MATERIALS": [dict(zip(("part", "lot"), unkey(k))) for k in up.get("t", ())],
                        "WAFER_ROOT": ", ".join(roots)})
    return out


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
