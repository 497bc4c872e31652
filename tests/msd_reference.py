"""The per-CID reference path of the backward MSD job, kept for the tests to check the job against.

The backward job partitions lots, not CIDs (:mod:`tracebus.trace.msd.lots`), and builds its
detail rows from per-node records (:mod:`tracebus.trace.msd.job.detailrows`). What it must
equal is the straightforward per-CID computation here: each unit's context maps a CID to the
defective lots it is an ancestor of (:func:`backward_context`, which the library's
:func:`tracebus.trace.msd.fold` takes), each lot's upstream sets are folded over those CIDs'
rows (:func:`fold_lot_upstream`) and joined with the detection rows
(:func:`backward_detail_rows`). Only the tests use it, so it lives with them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from tracebus.trace.msd._util import getter, key, rate_pct, text, unkey, values
from tracebus.trace.msd.detail import _masked
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msd.params import MsdParams


def backward_context(chunk_cids: Iterable[str], ancestors: Mapping[str, Iterable[str]],
                     defective_lots: Iterable[str]) -> dict:
    """Context of a backward unit: each chunk CID → the defective lots it is (an ancestor of).

    Args:
        chunk_cids: the unit's CIDs.
        ancestors: lineage ``{seed: [ancestor cids]}``; a seed is its own ancestor (self row).
        defective_lots: lots of mask D with REJECTQTY > 0 (:func:`tracebus.trace.msd.detection.defective_lots`).
    """
    chunk = {text(c) for c in chunk_cids}
    lots: dict[str, set] = {}
    for seed in defective_lots:
        values = ancestors.get(seed)
        if not isinstance(values, (list, tuple, set)):
            continue  # no lineage rows for this lot: no upstream attribution
        for anc in {seed, *(text(a) for a in values if text(a))}:
            if anc in chunk:
                lots.setdefault(anc, set()).add(seed)
    return {"lots": {a: sorted(s) for a, s in lots.items()}}


def fold_lot_upstream(context: Mapping[str, Any], batches) -> dict:
    """Per-lot upstream sets from one backward unit: ``{lot: {"m": [...], "t": [...], "e": [...]}}``.

    Args:
        context: ``{"lots": {ancestor: [lots]}}`` as :func:`backward_context` builds, but
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
