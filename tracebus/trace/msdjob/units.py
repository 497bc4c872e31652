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
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msdjob import detailrows, reduce
from tracebus.trace.msdjob.plan import AGGREGATE, CONTEXT, DETAIL, DETECTION, pack, unpack

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
               AGGREGATE: aggregate_unit}.get(ctx.section, events_unit)
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
    if params.direction == "forward":
        orders = det.get("det", {}).get("orders", [])
        store.put_artifact(job_id, "station_order", pack(min(orders) if orders else params.station_order))
        contexts = _forward_contexts(store, job_id, plan, defective)
    else:
        contexts = _backward_contexts(store, job_id, app, plan, home, set(defective))
    for c, value in contexts.items():
        store.put_artifact(job_id, f"ctx:{c}", pack(value))
        heartbeat()
    log.info("job %s: contexts of %d chunks, %d defective lots", job_id, len(contexts), len(defective))


def _backward_contexts(store, job_id, app, plan, home: dict, defective: set) -> dict[int, dict]:
    """Per chunk: ``lots`` (ancestor -> defective lots), ``all`` (ancestor -> every seed, for the
    detail) and ``home`` (seed -> its chunk, where its detail records go)."""
    out: dict[int, dict] = {}
    seed_chunks = -(-app["msd"]["seed_count"] // plan.chunk_items)
    for s in range(seed_chunks):
        lin = unpack(store.get_artifact(job_id, f"lin:{s}"), {})
        for seed, ancestors in lin.get("anc", {}).items():
            for node in {seed, *ancestors}:
                c = home.get(node)
                if c is None:
                    continue
                ctx = out.setdefault(c, {"lots": {}, "all": {}, "home": {}})
                ctx["all"].setdefault(node, []).append(seed)
                ctx["home"][seed] = home[seed]
                if seed in defective:
                    ctx["lots"].setdefault(node, []).append(seed)
    return out


def _forward_contexts(store, job_id, plan, defective: list) -> dict[int, dict]:
    seeds = unpack(store.get_artifact(job_id, "seeds"), [])
    children = unpack(store.get_artifact(job_id, "fwd"), {})
    seed_map = msd.forward_seed_map(seeds, children, defective)
    return {c: msd.forward_context(store.load_input(job_id, c), seed_map, defective)
            for c in range(plan.n_chunks)}


def events_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """One domain's event rows of the chunk folded batch by batch; rows are not stored (MSD
    answers ``data: []``), only counted, so Redis holds no event rows."""
    context = unpack(ctx.store.get_artifact(ctx.job_id, f"ctx:{chunk}"), {})
    backward = params.direction == "backward"
    part, lots, rows = msd.empty(params.direction), {}, 0
    for columns, batch in rt.source.fetch(ctx.section, ctx.input, rt.settings.fetchmany_rows):
        rows += len(batch)
        part = msd.merge(part, msd.fold(context, params.direction, [(columns, batch)]))
        if backward:
            found = msd_detail.fold_lot_upstream({"lots": context.get("all", {})}, [(columns, batch)])
        else:
            found = msd_detail.fold_lot_downstream(context, [(columns, batch)])
        lots = msd.merge_data(lots, found)
        heartbeat()
    buckets: dict[int, dict] = {}
    for lot, rec in lots.items():
        c = context.get("home", {}).get(lot, chunk) if backward else chunk
        buckets.setdefault(c, {})[lot] = rec
    _write_lot_records(ctx, buckets)
    ctx.set_partial(pack({"p": part, "rows": rows}))


def _write_lot_records(ctx: UnitContext, buckets: dict[int, dict]) -> None:
    """Per-lot records into the hash of each lot's chunk, under this unit (a re-run replaces)."""
    keys = TraceKeys(ctx.store.settings.key_prefix)
    pipe = ctx.store.redis.pipeline(transaction=False)
    for c, records in buckets.items():
        key = keys.msd_lots(ctx.job_id, c)
        pipe.hset(key, str(ctx.unit), pack(records))
        pipe.expire(key, ctx.store.settings.job_ttl_s)
    pipe.execute()


def detail_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Detail rows of the chunk's lots, stored by row id; their sort keys left as the partial."""
    store, job_id = ctx.store, ctx.job_id
    keys = TraceKeys(store.settings.key_prefix)
    records: dict = {}
    for raw in store.redis.hvals(keys.msd_lots(job_id, chunk)):
        records = msd.merge_data(records, unpack(raw))
    det_rows, columns = [], list(DETECTION_COLUMNS)
    layout = store.layouts(job_id, [DETECTION])[DETECTION]
    for unit, part, count in layout.parts:
        if unit == chunk and count:
            columns, rows = store.read_chunk(job_id, DETECTION, unit, part)
            det_rows.extend(rows)
    if params.direction == "forward":
        order = unpack(store.get_artifact(job_id, "station_order"), params.station_order)
        rows = detailrows.forward_rows(det_rows, columns, records, order)
    else:
        lin = unpack(store.get_artifact(job_id, f"lin:{chunk}"), {})
        seeds = set(unpack(store.get_artifact(job_id, "seeds"), []))
        rows = detailrows.backward_rows(det_rows, columns, records, lin, seeds)
    sort, cells = detailrows.store_rows(store.redis, keys.msd_rows(job_id), chunk, rows,
                                        store.settings.job_ttl_s)
    ctx.set_partial(pack({"sort": sort, "cells": cells}))


def aggregate_unit(rt, ctx: UnitContext, app: dict, params, chunk: int) -> None:
    """Chunk 0 only: the final reduce (:func:`.reduce.reduce_job`)."""
    if chunk == 0:
        reduce.reduce_job(ctx.store, ctx.job_id, app, params)
