"""Per-unit contexts and the fold of event rows into the ``ev`` part of a partial (MSD.md §1.4-1.5, §1.8).

A unit is one domain × one chunk of CIDs. Before it runs, the job layer builds its *context*
from lineage and the merged detection partial, restricted to the unit's CIDs:

* backward — ``{"lots": {ancestor_cid: [defective lots]}}``: the inverted ancestor→lots index
  (self rows included) for the ancestors in the chunk. The backward job partitions lots
  instead (:mod:`.lots`); this per-CID fold is the reference it is tested against, and its
  context is built by the tests (tests/msd_reference.py);
* forward — ``{"seed": {cid: defect seed}, "self": [defect cids]}``: the forward-lineage re-key
  (descendant → defect seed) and the chunk's CIDs that are defect lots themselves.

Event rows are read by column name, so any domain's layout works and a missing column (e.g.
MATERIALDESCRIPTION) reads as NULL, as in the original's union-of-columns events spool.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping, Sequence

from tracebus.trace.domains import NA, UNFILLED_REASON
from tracebus.trace.msd import partial as _partial
from tracebus.trace.msd._util import SEP, getter, num, text, values


def wafer_roots(ancestors: Mapping[str, Any], seed_roots: Mapping[str, Any] | None) -> dict[str, str]:
    """SEED_ROOT_NAME per lot, for the seeds that have lineage rows (keys of ``ancestors``)."""
    roots = seed_roots or {}
    return {text(s): text(roots.get(text(s))) for s in ancestors if text(s) and text(roots.get(text(s)))}


def forward_seed_map(seeds: Sequence[str], children_map: Mapping[str, Iterable[str]],
                     defect_cids: Iterable[str]) -> dict[str, str]:
    """Descendant → defect seed over the forward lineage (self edge + BFS closure).

    Seeds are walked in the order given and a later seed overwrites an earlier one for a shared
    descendant, as the original's row-order dict build did.
    """
    defects = set(defect_cids)
    out: dict[str, str] = {}
    for seed in seeds:
        seed = text(seed)
        if not seed or seed not in defects:
            continue
        seen, queue = {seed}, deque([seed])
        while queue:
            for child in children_map.get(queue.popleft()) or ():
                child = text(child)
                if child and child not in seen:
                    seen.add(child)
                    queue.append(child)
        for cid in seen:
            out[cid] = seed
    return out


def forward_context(chunk_cids: Iterable[str], seed_map: Mapping[str, str],
                    defect_cids: Iterable[str]) -> dict:
    """Context of a forward unit: the re-key for the chunk's CIDs and its own defect CIDs."""
    chunk = {text(c) for c in chunk_cids}
    defects = set(defect_cids)
    seed = {c: seed_map.get(c, c) for c in chunk if c in defects or c in seed_map}
    return {"seed": seed, "self": sorted(chunk & defects)}


def fold(context: Mapping[str, Any], direction: str,
         batches: Iterable[tuple[Sequence[str], Iterable[Sequence[Any]]]]) -> dict:
    """Fold a unit's event batches into a partial (only its ``ev`` part is filled).

    Args:
        context: from :func:`forward_context`, or backward ``{"lots": {cid: [defective lots]}}``
            (the per-CID reference path the tests build, tests/msd_reference.py).
        direction: ``"backward"`` or ``"forward"``.
        batches: ``(columns, rows)`` pairs of any domain; columns are looked up by name.
    """
    out = _partial.empty(direction)
    for columns, rows in batches:
        fold_into(out, context, columns, rows)
    return freeze(out)


def fold_into(acc: dict, context: Mapping[str, Any], columns: Sequence[str], rows) -> None:
    """Fold one batch into ``acc``, a partial being folded (its sets not yet frozen): ``fold``
    is ``empty`` + ``fold_into`` per batch + :func:`freeze`."""
    if acc["dir"] == "forward":
        _fold_forward(context, getter(columns), rows, acc["ev"])
    else:
        _fold_backward(context, columns, rows, acc["ev"])


_BACKWARD_COLUMNS = ("MATERIALPARTNAME", "MATERIALLOTNAME", "MATERIALDESCRIPTION", "CONTAINERID",
                     "EQUIPMENTNAME", "EQUIPMENTID", "WORKCENTER_GROUP")


def _fold_backward(context: Mapping[str, Any], columns: Sequence[str], rows, ev: dict) -> None:
    index = context.get("lots", {})
    mach, mat, desc, eqids = (ev.setdefault(k, {}) for k in ("mach", "mat", "desc", "eqid"))
    for part, mlot, d, cid, name, eq_id, group in values(columns, rows, _BACKWARD_COLUMNS):
        # Each cell read as text, with a fast path for the usual str cells (as detection's fold).
        cid = cid if cid.__class__ is str else text(cid)
        part = (part if part.__class__ is str else text(part)).strip()
        if part:
            mkey = part + SEP + (mlot if mlot.__class__ is str else text(mlot)).strip()
            d = (d if d.__class__ is str else text(d)).strip()
            if d and (mkey not in desc or d < desc[mkey]):
                desc[mkey] = d
        lots = index.get(cid)
        if not lots:
            continue
        name = (name if name.__class__ is str else text(name)).strip()
        if part:
            s = mat.get(mkey)
            if s is None:
                mat[mkey] = set(lots)
            else:
                s.update(lots)
        if name:
            eq_text = (eq_id if eq_id.__class__ is str else text(eq_id)).strip()
            k = (group if group.__class__ is str else text(group)) + SEP + name + SEP + eq_text
            s = mach.get(k)
            if s is None:
                mach[k] = set(lots)
            else:
                s.update(lots)
        if eq_id is not None:
            eqids[eq_id if eq_id.__class__ is str else str(eq_id)] = 1


def _fold_forward(context, get, rows, ev) -> None:
    seed_of, own = context.get("seed", {}), set(context.get("self", ()))
    attr, trend, matrix = (ev.setdefault(k, {}) for k in ("attr", "trend", "matrix"))
    for row in rows:
        cid = text(get(row, "CONTAINERID"))
        group = text(get(row, "WORKCENTER_GROUP")).strip()
        if not group or (cid not in seed_of and cid not in own):
            continue
        seed = seed_of.get(cid, cid)
        eq = get(row, "EQUIPMENTNAME")
        eq = NA if eq is None else str(eq).strip()
        trackin, reject = num(get(row, "TRACKINQTY")) or 0, num(get(row, "REJECT_TOTAL_QTY")) or 0
        g = attr.setdefault(group, {"lots": set(), "i": 0, "r": 0, "m": {}, "lr": {}})
        if trackin > 0:
            trackin = int(trackin)
            g["lots"].add(seed)
            g["i"] += trackin
            _add(g["m"].setdefault(eq, {"i": 0, "r": 0}), "i", trackin)
            day = text(get(row, "TRACKINTIMESTAMP"))[:10]
            if cid in own and day:
                _add(trend.setdefault(group, {}).setdefault(day, {"i": 0, "r": 0}), "i", trackin)
        if reject > 0:
            reject = int(reject)
            reason = get(row, "LOSSREASONNAME")
            reason = UNFILLED_REASON if reason is None else str(reason).strip()
            g["r"] += reject
            _add(g["m"].setdefault(eq, {"i": 0, "r": 0}), "r", reject)
            _add(g["lr"], reason, reject)
            day = text(get(row, "TXNDATE"))[:10]
            if cid in own and day:
                _add(trend.setdefault(group, {}).setdefault(day, {"i": 0, "r": 0}), "r", reject)
            if reject > 0:
                cell = matrix.setdefault(group, {}).setdefault(seed, {})
                _add(cell, reason or UNFILLED_REASON, reject)


def _add(d: dict, k: str, v) -> None:
    d[k] = d.get(k, 0) + v


def freeze(obj):
    """Turn the sets used while folding into sorted lists (the stored form)."""
    if isinstance(obj, dict):
        return {k: freeze(v) for k, v in obj.items()}
    if isinstance(obj, set):
        return sorted(obj)
    return obj
