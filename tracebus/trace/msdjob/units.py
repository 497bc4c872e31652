"""The MSD unit handler: what a worker runs for one unit of an MSD events job, by section.

See the package docstring for the stages. Every handler keeps at most one CID chunk's
worth of rows (detection rows of a chunk, or one fetch batch of event rows) besides its
context; only the context unit (chunk 0 of ``context``) holds the whole lineage index, and
only the reduce (chunk 0 of ``aggregate``) the merged partial.
"""

from __future__ import annotations

import logging

from tracebus.engine.worker import heartbeat
from tracebus.jobs.runner import UnitContext
from tracebus.trace import msd
from tracebus.trace.keys import TraceKeys
from tracebus.trace.msd import detail as msd_detail
from tracebus.trace.msd import events as msd_events
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msdjob import detailrows, reduce
from tracebus.trace.msdjob.plan import AGGREGATE, CONTEXT, DETAIL, DETECTION, FINALIZE, pack, unpack

log = logging.getLogger(__name__)

_apps: dict[str, dict] = {}


def _app(ctx: UnitContext) -> dict:
    """The job's app fields (immutable per job, so cached per process)."""
    app = _apps.get(ctx.job_id)
    if app is None:
        if len(_apps) > 64:
            _apps.clear()
        app = _apps[ctx.job_id] = ctx.store.status(ctx.job_id)["app"]
    return app


def run_unit(rt, ctx: UnitContext) -> None:
    """Run one unit of an MSD job with the worker's runtime ``rt`` (settings and source)."""
    app = _app(ctx)
    params = msd.MsdParams.from_params(app["params"])
    chunk = ctx.store.plan(ctx.job_id).chunk_of(ctx.unit)
    handler = {DETECTION: detection_unit, CONTEXT: context_unit, DETAIL: detail_unit,
               AGGREGATE: aggregate_unit, FINALIZE: finalize_unit}.get(ctx.section, events_unit)
    handler(rt, ctx, app, params, chunk)


def detection_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Detection rows of the chunk's seeds (the whole chunk in container mode), stored and folded."""
    info = app["msd"]
    plan = ctx.store.plan(ctx.job_id)
    cids = list(ctx.input)
    if not info["container_mode"]:
        cids = cids[:max(0, info["seed_count"] - chunk * plan.chunk_items)]
    lin = unpack(ctx.store.get_artifact(ctx.job_id, f"lin:{chunk}"), {})
    roots = msd.wafer_roots(lin.get("anc", {}), lin.get("root")) if lin else {}
    dates = {} if info["container_mode"] else {"start_date": params.start_date, "end_date": params.end_date}
    rows, columns = [], list(DETECTION_COLUMNS)
    if cids:
        for columns, batch in rt.source.detect_by_cids(list(params.stations), cids,
                                                       rt.settings.fetchmany_rows, **dates):
            ctx.write(columns, batch)
            rows.extend(batch)
    ctx.set_partial(pack({"p": msd.fold_detection(params, rows, columns, roots)}))


def context_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Chunk 0 only: every chunk's context from the merged detection partials and lineage."""
    if chunk != 0:
        return
    store, job_id = ctx.store, ctx.job_id
    plan = store.plan(job_id)
    det = msd.empty(params.direction)
    for unit, raw in store.iter_partials(job_id):
        if plan.section_of(unit) == DETECTION:
            det = msd.merge(det, unpack(raw)["p"])
    home = {}
    for c in range(plan.n_chunks):
        home.update(dict.fromkeys(store.load_input(job_id, c), c))
    defective = msd.defective_lots(det)
    if params.direction == "backward":  # lot_defect / lot_input by lot position, for the buckets
        position = reduce.lot_positions(store, job_id, plan, app["msd"]["seed_count"])
        # Detected lots that are not seeds (container mode) have no lineage, hence no lot sets.
        store.put_artifact(job_id, "defective", pack({position[lot]: v for lot, v in
                                                      det.get("det", {}).get("defective", {}).items()
                                                      if lot in position}))
    if params.direction == "forward":
        orders = det.get("det", {}).get("orders", [])
        store.put_artifact(job_id, "station_order", pack(min(orders) if orders else params.station_order))
        contexts = _forward_contexts(store, job_id, plan, defective)
    else:
        contexts = _backward_contexts(store, job_id, position, home, set(defective))
    for c, value in contexts.items():
        store.put_artifact(job_id, f"ctx:{c}", pack(value))
        heartbeat()
    log.info("job %s: contexts of %d chunks, %d defective lots", job_id, len(contexts), len(defective))


def _backward_contexts(store, job_id, position: dict, home: dict, defective: set) -> dict[int, dict]:
    """Per chunk: ``lots`` = ancestor (or seed) CID of the chunk -> the defective lots it is in
    the lineage of (the inverted index of :func:`tracebus.trace.msd.backward_context`).

    Lots are named by their position in the job's items, not their CID: the events partials
    hold millions of (key, lot) pairs at 114K CIDs, and small ints unpack, hash and merge
    faster and smaller than strings; the bucket units read ``defective`` keyed the same way.
    """
    out: dict[int, dict] = {}
    for s in range(-(-len(position) // store.plan(job_id).chunk_items)):  # the chunks holding seeds
        lin = unpack(store.get_artifact(job_id, f"lin:{s}"), {})
        for seed, ancestors in lin.get("anc", {}).items():
            if seed not in defective:
                continue
            for node in {seed, *ancestors}:
                c = home.get(node)
                if c is not None:
                    out.setdefault(c, {"lots": {}})["lots"].setdefault(node, []).append(position[seed])
    return out


def _forward_contexts(store, job_id, plan, defective: list) -> dict[int, dict]:
    seeds = unpack(store.get_artifact(job_id, "seeds"), [])
    children = unpack(store.get_artifact(job_id, "fwd"), {})
    seed_map = msd.forward_seed_map(seeds, children, defective)
    return {c: msd.forward_context(store.load_input(job_id, c), seed_map, defective)
            for c in range(plan.n_chunks)}


def events_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """One domain's event rows of the chunk folded batch by batch into the aggregation partial,
    and into each CID's own record for the detail (backward: its machines, materials and
    equipment ids; forward: a defect lot's downstream groups and rejects). The rows themselves
    are not stored (MSD answers ``data: []``), only counted."""
    context = unpack(ctx.store.get_artifact(ctx.job_id, f"ctx:{chunk}"), {})
    backward = params.direction == "backward"
    own = dict.fromkeys(ctx.input)  # each CID is its own "lot" for its record: no fan-out here
    # One accumulator (sets) over the batches, frozen once: merging a frozen partial per batch
    # re-sorted every lot set on each batch.
    acc, found, records, rows = msd.empty(params.direction), {}, {}, 0
    # Backward reads only the columns it folds (the same rows, several times cheaper to query);
    # forward sums per row and reads the domains' full rows.
    read = rt.source.backward_rows if backward else rt.source.fetch
    for columns, batch in read(ctx.section, ctx.input, rt.settings.fetchmany_rows):
        rows += len(batch)
        if backward:
            msd_events.fold_backward_records_into(acc, found, context, own, columns, batch)
        else:
            msd_events.fold_into(acc, context, columns, batch)
            records = msd.merge_data(records, msd_detail.fold_lot_downstream(context, [(columns, batch)]))
        heartbeat()
    if backward:  # the lot sets go to their buckets; the partial keeps only the row count
        _write_buckets(ctx, reduce.split_ev(acc.pop("ev"), reduce.n_buckets(ctx.store.plan(ctx.job_id))))
        acc["ev"] = {}
    part = msd_events.freeze(acc)
    keys = TraceKeys(ctx.store.settings.key_prefix)
    if backward:  # stored unsorted: readers union them
        _write_hash(ctx, keys.msd_cids(ctx.job_id, ctx.section),
                    {cid: {"m": list(r["m"]), "t": list(r["t"])} for cid, r in found.items()})
        # Apart: the detail unit reads only these, for every lineage node of its lots.
        _write_hash(ctx, keys.msd_equipment(ctx.job_id, ctx.section),
                    {cid: list(r["e"]) for cid, r in found.items() if r["e"]})
    else:
        _write_hash(ctx, keys.msd_cids(ctx.job_id, ctx.section), records)
    ctx.set_partial(pack({"p": part, "rows": rows}))


def _write_buckets(ctx: UnitContext, buckets: dict[int, dict]) -> None:
    keys = TraceKeys(ctx.store.settings.key_prefix)
    pipe = ctx.store.redis.pipeline(transaction=False)
    for b, ev in buckets.items():
        pipe.hset(keys.msd_ev(ctx.job_id, b), str(ctx.unit), pack(ev))
        pipe.expire(keys.msd_ev(ctx.job_id, b), ctx.store.settings.job_ttl_s)
    pipe.execute()


def _write_hash(ctx: UnitContext, key: str, fields: dict) -> None:
    """Each CID's packed value into a hash of the job, with the job's TTL (a re-run rewrites
    the same fields)."""
    if not fields:
        return
    pipe = ctx.store.redis.pipeline(transaction=False)
    pipe.hset(key, mapping={cid: pack(value) for cid, value in fields.items()})
    pipe.expire(key, ctx.store.settings.job_ttl_s)
    pipe.execute()


def _read_hash(ctx: UnitContext, key: str, nodes: list[str]):
    """``(node, unpacked value)`` of the fields ``nodes`` of hash ``key`` that exist, 1000 a round trip."""
    for i in range(0, len(nodes), 1000):
        part = nodes[i:i + 1000]
        for node, raw in zip(part, ctx.store.redis.hmget(key, part)):
            if raw is not None:
                yield node, unpack(raw)


def _lot_equipment(ctx: UnitContext, app: dict, lots: dict[str, list[str]]) -> dict:
    """Backward, per lot: ``{"e": set}``, the distinct equipment ids over its lineage nodes and
    every domain (UPSTREAM_MACHINE_COUNT, a sort key). The machine and material lists of a row
    are unioned when its page is read (DetailStore), not here."""
    keys = TraceKeys(ctx.store.settings.key_prefix)
    nodes = sorted({n for values in lots.values() for n in values})
    found: dict[str, list] = {}
    for domain in app["msd"]["domains"]:
        for node, ids in _read_hash(ctx, keys.msd_equipment(ctx.job_id, domain), nodes):
            found.setdefault(node, []).append(ids)
    out = {}
    for lot, members in lots.items():
        union: set = set()
        for n in members:
            for ids in found.get(n, ()):
                union.update(ids)
        out[lot] = {"e": union}
    return out


def _lot_downstream(ctx: UnitContext, app: dict, lots: list[str]) -> dict:
    """Forward, per defect lot: its own downstream record, merged over the domains."""
    keys = TraceKeys(ctx.store.settings.key_prefix)
    out: dict[str, dict] = {}
    for domain in app["msd"]["domains"]:
        for lot, rec in _read_hash(ctx, keys.msd_cids(ctx.job_id, domain), sorted(lots)):
            out[lot] = msd.merge_data(out[lot], rec) if lot in out else rec
    return out


def detail_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Detail rows of the chunk's lots, stored by row id; their sort keys left as the partial."""
    store, job_id = ctx.store, ctx.job_id
    keys = TraceKeys(store.settings.key_prefix)
    det_rows, columns = [], list(DETECTION_COLUMNS)
    layout = store.layouts(job_id, [DETECTION])[DETECTION]
    for unit, part, count in layout.parts:
        if unit == chunk and count:
            columns, rows = store.read_chunk(job_id, DETECTION, unit, part, layout.attempts[unit])
            det_rows.extend(rows)
    lots = {str(r[0]) for r in det_rows}
    if params.direction == "forward":
        records = _lot_downstream(ctx, app, list(lots))
        order = unpack(store.get_artifact(job_id, "station_order"), params.station_order)
        rows = detailrows.forward_rows(det_rows, columns, records, order)
    else:
        lin = unpack(store.get_artifact(job_id, f"lin:{chunk}"), {})
        anc = lin.get("anc", {})
        records = _lot_equipment(ctx, app, {lot: [lot, *anc.get(lot, ())] for lot in lots if lot in anc})
        rows = detailrows.backward_rows(det_rows, columns, records, lin)
    sort, cells = detailrows.store_rows(store.redis, keys.msd_rows(job_id), chunk, rows,
                                        store.settings.job_ttl_s)
    ctx.set_partial(pack({"sort": sort, "cells": cells}))


def aggregate_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Backward: units below :func:`.reduce.n_buckets` merge one bucket of lot sets each; the
    next unit (or unit 0 of a one-chunk job) builds the detail orderings; the rest return."""
    plan = ctx.store.plan(ctx.job_id)
    buckets = reduce.n_buckets(plan)
    if params.direction == "backward" and chunk < buckets:
        ctx.set_partial(pack(reduce.bucket_unit(ctx.store, ctx.job_id, params, chunk)))
    if chunk == min(buckets, plan.n_chunks - 1):
        reduce.orderings_unit(ctx.store, ctx.job_id)


def finalize_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Chunk 0 only: the final reduce (:func:`.reduce.finalize_job`)."""
    if chunk == 0:
        reduce.finalize_job(ctx.store, ctx.job_id, app, params)
