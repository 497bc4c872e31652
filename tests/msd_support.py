"""Drive tracebus.trace.msd the way the job layer will: detection chunks, units, merge, finalize."""

from __future__ import annotations

from tests import msd_reference
from tracebus.trace import msd
from tracebus.trace.domains import COLUMNS

UPSTREAM = COLUMNS["upstream_history"]
MATERIALS = COLUMNS["materials"] + ("MATERIALDESCRIPTION",)
DOWNSTREAM = COLUMNS["downstream_rejects"]


def det_row(cid, name, trackin, equipment, workflow, ts, reason, qty, *, pj="PJ", pkg="PKG",
            workcenter="TMTT", eq_id=None):
    """A detection row as a dict (MSD.md §1.1 columns)."""
    return {"CONTAINERID": cid, "CONTAINERNAME": name, "PJ_TYPE": pj, "PRODUCTLINENAME": pkg,
            "WORKFLOW": workflow, "FINISHEDRUNCARD": "RC-" + cid, "DETECTION_EQUIPMENTID": eq_id,
            "DETECTION_EQUIPMENTNAME": equipment, "WORKCENTERNAME": workcenter,
            "TRACKINQTY": trackin, "TRACKINTIMESTAMP": ts, "LOSSREASONNAME": reason,
            "REJECTQTY": qty}


def upstream(cid, workcenter, group, eq_id, eq_name, ts="2024-12-30 08:00:00", qty=100):
    row = dict(zip(UPSTREAM, (None,) * len(UPSTREAM)))
    row.update(CONTAINERID=cid, WORKCENTERNAME=workcenter, WORKCENTER_GROUP=group,
               EQUIPMENTID=eq_id, EQUIPMENTNAME=eq_name, TRACKINTIMESTAMP=ts, TRACKINQTY=qty)
    return tuple(row[c] for c in UPSTREAM)


def material(cid, part, lot, eq_name, desc):
    row = dict(zip(MATERIALS, (None,) * len(MATERIALS)))
    row.update(CONTAINERID=cid, MATERIALPARTNAME=part, MATERIALLOTNAME=lot, EQUIPMENTNAME=eq_name,
               MATERIALDESCRIPTION=desc)
    return tuple(row[c] for c in MATERIALS)


def downstream(cid, group, reason, eq_name, qty, day):
    row = dict(zip(DOWNSTREAM, (None,) * len(DOWNSTREAM)))
    row.update(CONTAINERID=cid, WORKCENTERNAME=group, WORKCENTER_GROUP=group, LOSSREASONNAME=reason,
               EQUIPMENTNAME=eq_name, REJECT_TOTAL_QTY=qty, TXNDATE=day)
    return tuple(row[c] for c in DOWNSTREAM)


def columns_of(domain):
    return {"upstream_history": UPSTREAM, "materials": MATERIALS, "downstream_rejects": DOWNSTREAM}[domain]


def detection_partial(params, det_chunks, lineage):
    roots = msd.wafer_roots(lineage.get("ancestors", {}), lineage.get("seed_roots"))
    return msd.merge_all(params.direction,
                         [msd.fold_detection(params, chunk, None, roots) for chunk in det_chunks])


def context_for(params, det, lineage, seeds, chunk):
    if params.direction == "forward":
        defect = msd.defective_lots(det)
        seed_map = msd.forward_seed_map(seeds, lineage.get("children_map", {}), defect)
        return msd.forward_context(chunk, seed_map, defect)
    return msd_reference.backward_context(chunk, lineage["ancestors"], msd.defective_lots(det))


def unit_partial(params, det, lineage, seeds, domain, cids, rows):
    """Fold one unit: ``rows`` of ``domain`` restricted to the CID chunk ``cids``."""
    chunk = set(cids)
    mine = [r for r in rows if r[0] in chunk]
    ctx = context_for(params, det, lineage, seeds, chunk)
    return msd.fold(ctx, params.direction, [(columns_of(domain), mine)])


def aggregate(params, det_rows, lineage, seeds, events, **kw):
    """Everything in one detection chunk and one unit per domain."""
    det = detection_partial(params, [det_rows], lineage)
    parts = [det]
    for domain, rows in events.items():
        cids = {r[0] for r in rows}
        parts.append(unit_partial(params, det, lineage, seeds, domain, cids, rows))
    return msd.finalize(msd.merge_all(params.direction, parts), params, **kw)
