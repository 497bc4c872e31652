"""Detail rows of MSD.md §3 as stored for read-time filtering, and the filter itself.

The detail endpoint applies ``loss_reasons``, ``pj_types`` and ``packages`` at read time, so
rows are stored *unfiltered* with a few hidden fields (names starting with ``_``) that decide
their visibility under any filter, and a small table of counts per filter cell gives
``total_count`` without reading the rows:

* backward — one row per lot x reason with REJECTQTY > 0 (kind ``p``, reason ``_r``), or one
  ``""`` row for a lot without any (kind ``z``, always shown). A lot with rejects *and* a
  zero/NULL row also gets a hidden fallback ``""`` row (kind ``f``, ``_pos`` = its reasons),
  shown only when a loss-reason filter keeps none of its reasons — exactly the lot's row of
  mask D in the original;
* forward — one row per defect lot with its per-reason rejects (``_rs``; ``_rnull`` = rejects
  with a NULL reason); DEFECT_QTY and DETECTION_LOSS_REASON are recomputed over the selected reasons.

``_pj`` / ``_pkg`` hold TRIM(PJ_TYPE) / TRIM(PRODUCTLINENAME) for the population mask, and
``_n`` a backward row's lineage nodes (the lot and its ancestors): UPSTREAM_MACHINES and
UPSTREAM_MATERIALS are not stored (about 2.7 KB a row at the sample's ~90 items per lot) but
unioned from the per-CID records of those nodes when the row is read (:func:`upstream_lists`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from tracebus.jobs.budget import FIELD_BYTES
from tracebus.trace.msd import MsdParams
from tracebus.trace.msd import detail as msd_detail
from tracebus.trace.msd._util import getter, num, rate_pct, text, to_int, unkey, values
from tracebus.trace.msd.job.plan import packer

#: Sort keys of the detail endpoint -> (backward field, forward field). Forward as the
#: original's ``_get_forward_detail``: ``defect_qty`` sorts by the downstream rejects, and the
#: two backward-only keys fall back to the downstream reject rate.
SORT_FIELDS = {"defect_rate": ("DEFECT_RATE", "DOWNSTREAM_REJECT_RATE"),
               "defect_qty": ("DEFECT_QTY", "DOWNSTREAM_TOTAL_REJECT"),
               "input_qty": ("INPUT_QTY", "TRACKINQTY"),
               "ancestor_count": ("ANCESTOR_COUNT", "DOWNSTREAM_REJECT_RATE"),
               "upstream_machine_count": ("UPSTREAM_MACHINE_COUNT", "DOWNSTREAM_REJECT_RATE")}
SORT_KEYS = tuple(SORT_FIELDS)
#: Row ids are ``chunk << CHUNK_SHIFT | n``.
CHUNK_SHIFT = 16


def _trim(v: Any) -> str | None:
    return None if v is None else str(v).strip()


#: Detection columns the per-lot pass reads; the base values are those a backward row shows
#: (the largest of the lot's rows, as the library's detail rows take them).
_READ = ("CONTAINERID", "CONTAINERNAME", "PJ_TYPE", "PRODUCTLINENAME", "WORKFLOW", "FINISHEDRUNCARD",
         "DETECTION_EQUIPMENTNAME", "TRACKINQTY", "LOSSREASONNAME", "REJECTQTY")
_BASE = _READ[1:8]


def _lots(det_rows: Iterable, columns) -> dict[str, dict]:
    """Per lot, in one pass: ``pj`` / ``pkg`` (population attributes, trimmed, of its first
    row), ``pos`` (positive rejects per reason), ``zero`` (it has a zero or NULL-reason row)
    and ``base`` (the largest non-NULL value of each :data:`_BASE` column)."""
    out: dict[str, dict] = {}
    for cid, *cells in values(columns, det_rows, _READ):
        if cid is None:
            continue
        reason, qty = cells[7], num(cells[8])
        cid = text(cid)
        lot = out.get(cid)
        if lot is None:
            lot = out[cid] = {"base": cells[:7], "pos": {}, "zero": False, "pj": _trim(cells[1]),
                              "pkg": _trim(cells[2])}
        else:
            base = lot["base"]
            for n in range(7):
                v = cells[n]
                if v is not None and (base[n] is None or v > base[n]):
                    base[n] = v
        if qty is not None and qty > 0:
            lot["pos"][reason] = lot["pos"].get(reason, 0) + qty
        elif reason is None or qty == 0:
            lot["zero"] = True
    return out


def backward_rows(det_rows: list, columns, equipment: Mapping, lin: Mapping) -> list[dict]:
    """Stored backward rows of one chunk's lots (see the module docstring) from one pass over
    the detection rows (:func:`_lots`): the rows of the per-lot reference (``backward_detail_rows``
    of tests/msd_reference.py) without a mask (the tests hold the two equal) with the hidden fields added. WAFER_ROOT
    comes from ``lin["wr"]``, computed at submit over every seed; UPSTREAM_MACHINE_COUNT from
    ``equipment[lot]`` (the detail equipment ids its lineage reaches)."""
    anc_of, roots = lin.get("anc", {}), lin.get("wr", {})
    out = []
    for cid, lot in _lots(det_rows, columns).items():
        base, pos, zero = lot["base"], lot["pos"], lot["zero"]
        ancestors = anc_of.get(cid)
        inp = base[6]
        head = {"CONTAINERID": cid, **dict(zip(_BASE[:6], base)), "INPUT_QTY": inp}
        others = set(ancestors or ())
        others.discard(cid)
        others.discard("")  # lineage ids are strings (plan.lineage_artifacts): "" is the only falsy one
        tail = {"ANCESTOR_COUNT": len(others),
                "UPSTREAM_MACHINE_COUNT": len(equipment.get(cid, ())),
                "UPSTREAM_MACHINES": [], "UPSTREAM_MATERIALS": [], "WAFER_ROOT": roots.get(cid, ""),
                "_pj": lot["pj"], "_pkg": lot["pkg"], "_n": [cid, *ancestors] if ancestors is not None else []}
        if not pos:
            out.append({**head, "LOSS_REASON": "", "DEFECT_QTY": 0, "DEFECT_RATE": 0.0, **tail, "_k": "z"})
            continue
        fallback = zero and None not in pos
        for reason, defect in pos.items():
            shown = reason or ""
            out.append({**head, "LOSS_REASON": shown, "DEFECT_QTY": defect,
                        "DEFECT_RATE": rate_pct(defect, inp) if inp and inp > 0 else 0.0, **tail,
                        "_k": "p", "_r": reason if shown else next(r for r in pos if not r)})
            if fallback:
                fallback = False
                out.append({**head, "LOSS_REASON": "", "DEFECT_QTY": 0, "DEFECT_RATE": 0.0, **tail,
                            "_k": "f", "_pos": sorted(pos)})
    return out


def forward_rows(det_rows: list, columns, records: Mapping, station_order: int) -> list[dict]:
    """Stored forward rows of one chunk's defect lots."""
    rows = msd_detail.forward_detail_rows(MsdParams(direction="forward"), det_rows, records,
                                          station_order, columns)
    lots = _lots(det_rows, columns)
    by_name = {}
    get = getter(columns)
    for row in det_rows:
        by_name.setdefault(text(get(row, "CONTAINERNAME")), text(get(row, "CONTAINERID")))
    out = []
    for row in rows:
        lot = lots[by_name[row["CONTAINERNAME"]]]
        out.append({**row, "_pj": lot["pj"], "_pkg": lot["pkg"], "_k": "w",
                    "_rs": {text(r): to_int(q) for r, q in lot["pos"].items() if text(r)},
                    "_rnull": sum(to_int(q) for r, q in lot["pos"].items() if not text(r))})
    return out


def visible(row: Mapping, loss: frozenset | None, pj: frozenset | None, pkg: frozenset | None) -> dict | None:
    """The public row (hidden fields dropped, forward quantities recomputed) if it passes the
    read-time filters, else None."""
    if pj and row.get("_pj") not in pj or pkg and row.get("_pkg") not in pkg:
        return None
    kind = row["_k"]
    if kind == "p" and loss and row["_r"] is not None and row["_r"] not in loss:
        return None
    if kind == "f" and (not loss or set(row["_pos"]) & loss):
        return None
    public = {k: v for k, v in row.items() if not k.startswith("_")}
    if kind == "w" and loss:
        kept = {r: q for r, q in row["_rs"].items() if r in loss}
        qty = sum(kept.values()) + row["_rnull"]
        if qty <= 0:
            return None
        public["DEFECT_QTY"] = qty
        public["DETECTION_LOSS_REASON"] = (min(kept.items(), key=lambda kv: (-kv[1], kv[0]))[0]
                                           if kept else None)
    return public


def cell_of(row: Mapping) -> tuple:
    """The filter cell of a row, ``(kind, pj, pkg, reasons)``: the rows of one cell are all shown
    or all hidden by any filter, so ``total_count`` is a sum over cells, not over rows."""
    if row["_k"] == "w":
        reasons = sorted(row["_rs"]) + (["\0"] if row["_rnull"] else [])
    elif row["_k"] == "p":
        reasons = [row["_r"]]
    else:
        reasons = row.get("_pos", [])
    return row["_k"], row.get("_pj"), row.get("_pkg"), tuple(reasons)


def cell_visible(cell, loss, pj, pkg) -> bool:
    """Whether the rows of ``cell`` pass the filters (the same decision as :func:`visible`)."""
    kind, cpj, cpkg, reasons = cell[:4]
    if pj and cpj not in pj or pkg and cpkg not in pkg:
        return False
    if kind == "p":
        return not loss or reasons[0] is None or reasons[0] in loss
    if kind == "f":
        return bool(loss) and not set(reasons) & loss
    if kind == "w":
        return not loss or "\0" in reasons or bool(set(reasons) & loss)
    return True


def sort_columns(rows: list[dict]) -> dict:
    """The sort keys of one chunk's rows (row ``n`` has id ``chunk << CHUNK_SHIFT | n``), by
    column: ``v`` one list per sort key, and the tie-breakers (lot, then reason) as indexes
    into the chunk's distinct ``lots`` and ``reasons``; the orderings unit holds these for
    every row of the job, so they are kept small."""
    forward = bool(rows) and rows[0]["_k"] == "w"
    fields = [SORT_FIELDS[k][1 if forward else 0] for k in SORT_KEYS]
    lots: dict[str, int] = {}
    reasons: dict[str, int] = {}
    lot, reason = [], []
    for row in rows:
        name = text(row.get("CONTAINERID") or row.get("CONTAINERNAME"))
        lot.append(lots.setdefault(name, len(lots)))
        r = row.get("LOSS_REASON", "")
        reason.append(reasons.setdefault(r, len(reasons)))
    return {"v": [[row.get(f) or 0 for row in rows] for f in fields],
            "lots": list(lots), "lot": lot, "reasons": list(reasons), "reason": reason}


def store_rows(redis, key: str, chunk: int, rows: list[dict], ttl_s: int,
               charge: Callable[[int], None] = lambda n: None) -> tuple[dict, list]:
    """Write one chunk's rows under ids ``chunk << CHUNK_SHIFT | n``; return their
    :func:`sort_columns` and ``[kind, pj, pkg, reasons, rows]`` per filter cell. ``charge(bytes)``
    is called before each batch is written (the user's budget: it raises to refuse it)."""
    if len(rows) >= 1 << CHUNK_SHIFT:
        raise ValueError(f"chunk {chunk} has {len(rows)} detail rows; at most {1 << CHUNK_SHIFT}")
    cells = {}
    pipe = redis.pipeline(transaction=False)
    pack = packer()
    batch = {}  # one HSET of 500 fields, not 500 HSETs: the client's command packing dominated
    for n, row in enumerate(rows):
        batch[str(chunk << CHUNK_SHIFT | n)] = pack(row)
        cell = cell_of(row)
        cells[cell] = cells.get(cell, 0) + 1
        if n % 500 == 499:
            charge(sum(len(f) + len(v) + FIELD_BYTES for f, v in batch.items()))
            pipe.hset(key, mapping=batch)
            pipe.execute()
            batch = {}
    if batch:
        charge(sum(len(f) + len(v) + FIELD_BYTES for f, v in batch.items()))
        pipe.hset(key, mapping=batch)
    pipe.expire(key, ttl_s)
    pipe.execute()
    return sort_columns(rows), [[*cell, n] for cell, n in cells.items()]


def upstream_lists(records: list[Mapping]) -> dict:
    """UPSTREAM_MACHINES and UPSTREAM_MATERIALS of a row from its nodes' per-CID records."""
    machines, materials = set(), set()
    for r in records:
        machines.update(r.get("m", ()))
        materials.update(r.get("t", ()))
    return {"UPSTREAM_MACHINES": [{"station": a, "machine": b} for a, b in map(unkey, sorted(machines))],
            "UPSTREAM_MATERIALS": [{"part": a, "lot": b} for a, b in map(unkey, sorted(materials))]}
