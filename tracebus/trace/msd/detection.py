"""Fold detection rows (MSD.md §1.1 detection columns) into the ``det`` part of a partial.

One call folds one chunk of detection rows; chunks must partition CONTAINERIDs (a lot's rows in
one chunk), which is how detection is fetched (by CID chunks). Inside a chunk the per-lot and
per-(day, lot) values of §1.3-1.5 are computed exactly; across chunks they are only added, so the
merged ``det`` is the additive summary of §1.8 plus one small record per defective lot
(``det.defective``), which the events finalize joins against (lot_defect / lot_input) and from
which the job layer builds the per-unit contexts of :mod:`.events`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from tracebus.trace.domains import NO_SEQUENCE, workcenter_group
from tracebus.trace.msd import partial as _partial
from tracebus.trace.msd._util import UNKNOWN, day_of, getter, num, text, to_int, values
from tracebus.trace.msd.params import MsdParams

#: Columns of the MSD detection rows (MSD.md section 1.1), as the detection statement selects them
#: (:func:`.sql.detection_rows`) and tuple rows are read when no ``columns`` are given: one row per
#: (CONTAINERID, LOSSREASONNAME), the lot's columns repeated on each of its rows.
DETECTION_COLUMNS: tuple[str, ...] = (
    "CONTAINERID", "CONTAINERNAME", "PJ_TYPE", "PRODUCTLINENAME", "WORKFLOW", "FINISHEDRUNCARD",
    "DETECTION_EQUIPMENTID", "DETECTION_EQUIPMENTNAME", "WORKCENTERNAME", "TRACKINQTY",
    "TRACKINTIMESTAMP", "LOSSREASONNAME", "REJECTQTY",
)


def in_population(params: MsdParams, get, row) -> bool:
    """Mask P of §1.3: ``TRIM(PJ_TYPE)``/``TRIM(PRODUCTLINENAME)`` in the lists when given; NULL fails."""
    for column, wanted in (("PJ_TYPE", params.pj_types), ("PRODUCTLINENAME", params.packages)):
        if wanted:
            value = get(row, column)
            if value is None or str(value).strip() not in wanted:
                return False
    return True


def in_numerator(params: MsdParams, reason: Any, qty: Any) -> bool:
    """Mask D of §1.3: reason selected, or REJECTQTY = 0, or reason NULL (no loss reasons → all)."""
    if not params.loss_reasons:
        return True
    return reason is None or reason in params.loss_reasons or (qty is not None and qty == 0)


def _max(a, b):
    if a is None:
        return b
    return a if b is None or a >= b else b


def fold_detection(params: MsdParams, rows: Iterable[Any], columns: Sequence[str] | None = None,
                   wafer_roots: Mapping[str, str] | None = None) -> dict:
    """Fold one chunk of detection rows into a partial (only its ``det`` part is filled).

    Args:
        params: the parsed request parameters.
        rows: detection rows, dicts or tuples laid out as ``columns``.
        columns: tuple layout; default :data:`DETECTION_COLUMNS`.
        wafer_roots: backward only: lot → SEED_ROOT_NAME for the seeds that have lineage rows
            (see :func:`tracebus.trace.msd.events.wafer_roots`); None when there is no lineage.

    Returns:
        A partial; merge it with the others by :func:`tracebus.trace.msd.partial.merge`.
    """
    get = getter(columns or DETECTION_COLUMNS)
    out = _partial.empty(params.direction)
    if params.direction == "forward" or params.pj_types or params.packages:
        rows = [r for r in rows if get(r, "CONTAINERID") is not None and in_population(params, get, r)]
    elif not isinstance(rows, list):
        rows = list(rows)  # the backward fold skips rows without a CONTAINERID itself
    if params.direction == "forward":
        out["det"] = _fold_forward(params, get, rows)
    else:
        out["det"] = _fold_backward(params, columns or DETECTION_COLUMNS, rows, wafer_roots or {})
    return out


_BACKWARD_READ = ("CONTAINERID", "TRACKINQTY", "LOSSREASONNAME", "REJECTQTY", "TRACKINTIMESTAMP",
                  "DETECTION_EQUIPMENTNAME", "WORKFLOW")


def _fold_backward(params: MsdParams, columns, rows: list, roots: Mapping[str, str]) -> dict:
    p_input: dict[str, Any] = {}                       # lot -> MAX(TRACKINQTY) over P
    p_day: dict[tuple, Any] = {}                       # (day, lot) -> MAX(TRACKINQTY) over P
    d_input: dict[str, Any] = {}                       # lot -> MAX(TRACKINQTY) over D
    d_sum: dict[str, Any] = defaultdict(int)           # lot -> Σ REJECTQTY over D
    d_day: dict[tuple, Any] = defaultdict(int)
    reason_sum: dict[str, Any] = defaultdict(int)
    avail: set[str] = set()
    pos_reasons: dict[str, set] = defaultdict(set)     # lot -> reasons having REJECTQTY > 0
    by_reason: dict[str, list] = {}                    # reason -> [defect, lots]
    lot_def: dict[str, list] = {}                      # defective lot -> [defect, input, max det eq]
    lot_wf: dict[tuple, list] = {}                     # (lot, workflow) -> [defect, input]
    for lot, trackin, reason, qty, stamp, det_eq, workflow in values(columns, rows, _BACKWARD_READ):
        if lot is None:
            continue
        # Fast paths for the usual cell types (str ids and stamps, int quantities).
        lot = lot if lot.__class__ is str else text(lot)
        trackin = trackin if trackin.__class__ is int else num(trackin)
        qty = qty if qty.__class__ is int else num(qty)
        day = (stamp[:10] or None) if stamp.__class__ is str else day_of(stamp)
        p_input[lot] = _max(p_input.get(lot), trackin)
        p_day[(day, lot)] = _max(p_day.get((day, lot)), trackin)
        positive = qty is not None and qty > 0
        if positive and reason is not None and str(reason).strip():
            avail.add(str(reason))
        if not in_numerator(params, reason, qty):
            continue
        d_input[lot] = _max(d_input.get(lot), trackin)
        d_sum[lot] += qty or 0
        d_day[(day, lot)] += qty or 0
        if reason is not None and reason != "":
            reason_sum[str(reason)] += qty or 0
        if not positive:
            continue
        pos_reasons[lot].add(reason)
        if reason is not None and str(reason).strip():
            entry = by_reason.setdefault(str(reason), [0, set()])
            entry[0] += qty
            entry[1].add(lot)
        rec = lot_def.setdefault(lot, [0, None, None])
        rec[0] += qty
        rec[1] = _max(rec[1], trackin)
        rec[2] = _max(rec[2], det_eq)
        wf = text(workflow).strip() or UNKNOWN
        wrec = lot_wf.setdefault((lot, wf), [0, None])
        wrec[0] += qty
        wrec[1] = _max(wrec[1], trackin)
    det_machine, roots_chart = _defective_charts(lot_def, roots)
    return {
        "lots": len(p_input), "input": sum(v or 0 for v in p_input.values()),
        "dlots": sum(1 for v in d_sum.values() if v > 0), "defect": sum(d_sum.values()),
        "reason_sum": dict(reason_sum), "daily": _daily_backward(p_day, d_day), "avail": sorted(avail),
        "detail_count": sum(max(1, len(pos_reasons.get(lot, ()))) for lot in d_input),
        "by_reason": {r: {"d": d, "n": len(lots)} for r, (d, lots) in by_reason.items()},
        "d_input": sum(v or 0 for v in d_input.values()),
        "defective": {lot: {"d": rec[0], "i": rec[1] or 0} for lot, rec in lot_def.items()},
        "det_machine": det_machine, "workflow": _workflow_chart(lot_wf), "root": roots_chart,
    }


def _daily_backward(p_day: Mapping[tuple, Any], d_day: Mapping[tuple, Any]) -> dict[str, dict]:
    """Per day, the input (MAX(TRACKINQTY) over P per lot, summed) and the defect (Σ REJECTQTY
    over D) of the (day, lot) pairs of the population."""
    daily: dict[str, dict] = {}
    for (day, lot), trackin in p_day.items():
        cell = daily.setdefault(str(day), {"d": 0, "i": 0})
        cell["i"] += trackin or 0
        cell["d"] += d_day.get((day, lot), 0)
    return daily


def _defective_charts(lot_def: Mapping[str, list], roots: Mapping[str, str]) -> tuple[dict, dict]:
    """The defective lots (``lot -> [defect, input, detection machine]``) counted by their
    detection machine and by their wafer root: ``(det_machine, root)``, each ``{name: {"n", "d", "i"}}``."""
    det_machine: dict[str, dict] = {}
    roots_chart: dict[str, dict] = {}
    for lot, (defect, trackin, det_eq) in lot_def.items():
        name = text(det_eq).strip()
        if name:
            _add_nd(det_machine, name, defect, trackin or 0)
        root = roots.get(lot)
        if root and root.strip():
            _add_nd(roots_chart, root, defect, trackin or 0)
    return det_machine, roots_chart


def _workflow_chart(lot_wf: Mapping[tuple, list]) -> dict[str, dict]:
    """The defective (lot, workflow) pairs counted by workflow: ``{workflow: {"n", "d", "i"}}``."""
    workflow: dict[str, dict] = {}
    for (_lot, wf), (d, i) in lot_wf.items():
        _add_nd(workflow, wf, d, i or 0)
    return workflow


def _add_nd(chart: dict, name: str, defect, trackin) -> None:
    cell = chart.setdefault(name, {"n": 0, "d": 0, "i": 0})
    cell["n"] += 1
    cell["d"] += defect
    cell["i"] += trackin


def _fold_forward(params: MsdParams, get, rows: list) -> dict:
    avail = {str(get(r, "LOSSREASONNAME")).strip() for r in rows
             if get(r, "LOSSREASONNAME") is not None and (num(get(r, "REJECTQTY")) or 0) > 0}
    rows = [r for r in rows if in_numerator(params, get(r, "LOSSREASONNAME"), num(get(r, "REJECTQTY")))]
    lookup: dict[str, dict] = {}
    defect_cids: set[str] = set()
    day_input: dict[tuple, Any] = {}
    day_defect: dict[str, Any] = defaultdict(int)
    for row in rows:
        cid = text(get(row, "CONTAINERID"))
        reason, qty = get(row, "LOSSREASONNAME"), num(get(row, "REJECTQTY"))
        if cid not in lookup:
            group = workcenter_group(text(get(row, "WORKCENTERNAME")))
            lookup[cid] = {"i": to_int(get(row, "TRACKINQTY")), "r": {},
                           "eq": text(get(row, "DETECTION_EQUIPMENTNAME")),
                           "o": group.order if group else NO_SEQUENCE}
        if reason and to_int(qty) > 0:
            r = lookup[cid]["r"]
            r[str(reason)] = r.get(str(reason), 0) + to_int(qty)
        if qty is not None and qty > 0:
            defect_cids.add(cid)
        day = day_of(get(row, "TRACKINTIMESTAMP"))
        if day is None:
            continue
        day_input.setdefault((cid, day), num(get(row, "TRACKINQTY")) or 0)
        if qty is not None and qty > 0 and (not params.loss_reasons or reason in params.loss_reasons):
            day_defect[day] += qty
    daily: dict[str, dict] = {}
    for (cid, day), trackin in day_input.items():
        daily.setdefault(day, {"i": 0, "d": 0})["i"] += trackin
    for day, d in day_defect.items():
        daily.setdefault(day, {"i": 0, "d": 0})["d"] += d
    det_machine: dict[str, dict] = {}
    for data in lookup.values():
        cell = det_machine.setdefault(data["eq"] or UNKNOWN, {"n": 0, "d": 0, "i": 0})
        cell["n"] += 1
        cell["d"] += sum(data["r"].values())
        cell["i"] += data["i"]
    return {
        "lots": len(lookup), "input": sum(d["i"] for d in lookup.values()),
        "defect": sum(sum(d["r"].values()) for d in lookup.values()),
        "orders": sorted({d["o"] for d in lookup.values() if d["o"] < NO_SEQUENCE}),
        "avail": sorted(avail), "daily": daily, "det_machine": det_machine,
        "defective": {cid: {"i": lookup[cid]["i"], "r": lookup[cid]["r"]} for cid in defect_cids},
    }


def defective_lots(partial: Mapping[str, Any]) -> list[str]:
    """The defective lots of a merged detection partial (input of the events contexts)."""
    return sorted(partial.get("det", {}).get("defective", {}))
