"""The MSD unit handler: what a worker runs for one unit of an MSD events job, by section.

See the package docstring for the stages. Every handler keeps at most one chunk's worth of
rows (detection rows of a chunk, or one fetch batch of event rows) besides what it folds
them into; only the forward context unit (chunk 0 of ``context``) holds the whole lineage.
"""

from __future__ import annotations

import logging

from tracebus.engine.worker import heartbeat
from tracebus.jobs.budget import FIELD_BYTES
from tracebus.trace import msd
from tracebus.trace.msd.keys import MsdKeys
from tracebus.trace.msd import detail as msd_detail
from tracebus.trace.msd import events as msd_events
from tracebus.trace.msd import lots as msd_lots
from tracebus.trace.msd.detection import DETECTION_COLUMNS
from tracebus.trace.msd.job import detailrows, reduce
from tracebus.trace.msd.job.partials import DetailPartial, DetectionPartial, EventsPartial, FoldKeys
from tracebus.trace.msd.job.plan import CONTEXT, DETAIL, DETECTION, FINALIZE, pack, packer, unpack
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.runtime import TraceUnit

log = logging.getLogger(__name__)


def run_unit(ctx: TraceUnit) -> None:
    """Run one unit of an MSD job (its job's ``app``, plan and chunk, the worker's settings and
    source: all from the unit's context)."""
    params = msd.MsdParams.from_params(ctx.app["params"])
    handler = {DETECTION: detection_unit, CONTEXT: context_unit, DETAIL: detail_unit,
               FINALIZE: finalize_unit}.get(ctx.section, events_unit)
    handler(ctx, params)


def _seeds_of(ctx: TraceUnit) -> list[str]:
    """The seeds among the chunk's items (a job's items start with its seeds)."""
    return list(ctx.input)[:max(0, ctx.app["msd"]["seed_count"] - ctx.chunk * ctx.plan.chunk_items)]


def _detect(ctx: TraceUnit, params, keep) -> tuple[list, list]:
    """``(columns, rows)``: detection rows of the chunk's seeds (of the whole chunk in container
    mode), each batch also handed to ``keep``."""
    info = ctx.app["msd"]
    cids = list(ctx.input) if info["container_mode"] else _seeds_of(ctx)
    dates = {} if info["container_mode"] else {"start_date": params.start_date, "end_date": params.end_date}
    rows, columns = [], list(DETECTION_COLUMNS)
    if cids:
        for columns, batch in MsdReads(ctx.source).detect_by_cids(list(params.stations), cids,
                                                                  ctx.settings.fetchmany_rows, **dates):
            keep(columns, batch)
            rows.extend(batch)
    return columns, rows


def detection_unit(ctx: TraceUnit, params) -> None:
    """Forward: detection rows of the chunk, stored (the detail unit reads them) and folded."""
    columns, rows = _detect(ctx, params, ctx.write)
    ctx.set_partial(DetectionPartial(msd.fold_detection(params, rows, columns)).pack())


def context_unit(ctx: TraceUnit, params) -> None:
    """Forward, chunk 0 only: every chunk's context (descendant -> defect seed) from the merged
    detection partials and the forward lineage."""
    if ctx.chunk != 0:
        return
    store, job_id, plan = ctx.store, ctx.job_id, ctx.plan
    det = msd.empty(params.direction)
    for unit, raw in store.iter_partials(job_id):
        if plan.section_of(unit) == DETECTION:
            det = msd.merge(det, DetectionPartial.unpack(raw).part)
    defective = msd.defective_lots(det)
    orders = det.get("det", {}).get("orders", [])
    store.put_artifact(job_id, "station_order", pack(min(orders) if orders else params.station_order))
    seed_map = msd.forward_seed_map(unpack(store.get_artifact(job_id, "seeds"), []),
                                    unpack(store.get_artifact(job_id, "fwd"), {}), defective)
    for c in range(plan.n_chunks):
        store.put_artifact(job_id, f"ctx:{c}", pack(msd.forward_context(store.load_input(job_id, c),
                                                                        seed_map, defective)))
        heartbeat()
    log.info("job %s: contexts of %d chunks, %d defect lots", job_id, plan.n_chunks, len(defective))


def events_unit(ctx: TraceUnit, params) -> None:
    """One domain's event rows for the chunk. Backward: :func:`backward_events_unit`. Forward:
    the chunk's rows folded batch by batch into the aggregation partial, and each defect lot's
    downstream record into the domain's CID hash for the detail. Rows are not stored (MSD
    answers ``data: []``), only counted."""
    if params.direction == "backward":
        backward_events_unit(ctx, params)
        return
    context = unpack(ctx.store.get_artifact(ctx.job_id, f"ctx:{ctx.chunk}"), {})
    acc, records, rows = msd.empty(params.direction), {}, 0
    for columns, batch in ctx.source.fetch(ctx.section, ctx.input, ctx.settings.fetchmany_rows):
        rows += len(batch)
        msd_events.fold_into(acc, context, columns, batch)
        records = msd.merge_data(records, msd_detail.fold_lot_downstream(context, [(columns, batch)]))
        heartbeat()
    _write_hash(ctx, MsdKeys(ctx.store.settings.key_prefix).cids(ctx.job_id, ctx.section), records)
    ctx.set_partial(EventsPartial(msd_events.freeze(acc), rows).pack())


def backward_events_unit(ctx: TraceUnit, params) -> None:
    """One domain's rows of every lineage node of the chunk's seeds (:mod:`tracebus.trace.msd.lots`).

    Only the columns the fold reads are queried (:meth:`~tracebus.trace.msd.reads.MsdReads.backward_rows`).
    The partial carries each node's output keys and equipment ids for the detail unit of the same chunk
    (packed apart, so the finalize does not decode them), the smallest description per
    material key, and the row count of the nodes the chunk owns (``nodes:<chunk>``: a node
    shared with an earlier chunk is read again here but counted there). Each owned
    node's record (its machines and materials) goes to the domain's CID hash for detail pages.
    """
    nodes, n_own = unpack(ctx.store.get_artifact(ctx.job_id, f"nodes:{ctx.chunk}"), [[], 0])
    base = ctx.app["msd"]["domains"].index(ctx.section) * msd_lots.ID_SPAN
    fold = msd_lots.NodeFold(nodes[:n_own], params.upstream_groups, base)
    if nodes:
        reads = MsdReads(ctx.source)
        for columns, batch in reads.backward_rows(ctx.section, sorted(nodes), ctx.settings.fetchmany_rows):
            fold.fold(columns, batch)
            heartbeat()
    _write_hash(ctx, MsdKeys(ctx.store.settings.key_prefix).cids(ctx.job_id, ctx.section),
                {cid: record.stored() for cid, record in fold.records.items()})
    part = msd.empty("backward")
    part["ev"] = {"desc": fold.desc}
    keys = FoldKeys(fold.base, fold.table, fold.nodes, fold.machines, fold.equipment)
    ctx.set_partial(EventsPartial.with_fold(part, fold.rows, keys).pack())


def _write_hash(ctx: TraceUnit, key: str, fields: dict) -> None:
    """Each CID's packed value into a hash of the job, with the job's TTL (a re-run rewrites
    the same fields)."""
    if not fields:
        return
    pack_one = packer()
    packed = {cid: pack_one(value) for cid, value in fields.items()}
    ctx.store.charge(ctx.job_id, sum(len(cid) + len(v) + FIELD_BYTES for cid, v in packed.items()))
    pipe = ctx.store.redis.pipeline(transaction=False)
    pipe.hset(key, mapping=packed)
    pipe.expire(key, ctx.store.settings.job_ttl_s)
    pipe.execute()


def _lot_downstream(ctx: TraceUnit, lots: list[str]) -> dict:
    """Forward, per defect lot: its own downstream record, merged over the domains."""
    keys = MsdKeys(ctx.store.settings.key_prefix)
    out: dict[str, dict] = {}
    wanted = sorted(lots)
    for domain in ctx.app["msd"]["domains"]:
        for i in range(0, len(wanted), 1000):
            part = wanted[i:i + 1000]
            for lot, raw in zip(part, ctx.store.redis.hmget(keys.cids(ctx.job_id, domain), part)):
                if raw is not None:
                    rec = unpack(raw)
                    out[lot] = msd.merge_data(out[lot], rec) if lot in out else rec
    return out


def _chunk_keys(ctx: TraceUnit) -> tuple[dict, list]:
    """Backward: ``(table, [node key maps, machine maps, equipment maps])`` that the chunk's
    events units left, one map per domain, in one id space (:func:`..lots.combine`). A domain
    whose unit failed adds nothing (its quality_meta says so), as its rows would have."""
    folds = []
    for domain in ctx.app["msd"]["domains"]:
        raw = ctx.store.partial(ctx.job_id, ctx.plan.units_of(domain)[ctx.chunk])
        if raw is not None:
            folds.append(EventsPartial.unpack(raw).fold())
    table, maps = msd_lots.combine(folds)
    return table, maps + [[] for _ in range(3 - len(maps))]


def detail_unit(ctx: TraceUnit, params) -> None:
    """Detail rows of the chunk's lots, stored by row id; the partial holds their sort keys,
    the filter cells and, backward, the chunk's aggregation: the detection partial and, per
    output key, the chunk's defective lots whose lineage reaches it
    (:func:`tracebus.trace.msd.lots.lot_cells`)."""
    store, job_id, chunk = ctx.store, ctx.job_id, ctx.chunk
    backward: dict = {}
    if params.direction == "forward":
        det_rows, columns = [], list(DETECTION_COLUMNS)
        layout = store.layouts(job_id, [DETECTION])[DETECTION]
        for unit, part, count in layout.parts:
            if unit == chunk and count:
                columns, rows = store.read_chunk(job_id, DETECTION, unit, part, layout.attempts[unit])
                det_rows.extend(rows)
        records = _lot_downstream(ctx, list({str(r[0]) for r in det_rows}))
        order = unpack(store.get_artifact(job_id, "station_order"), params.station_order)
        rows = detailrows.forward_rows(det_rows, columns, records, order)
    else:
        lin = unpack(store.get_artifact(job_id, f"lin:{chunk}"), {})
        anc = lin.get("anc", {})
        # Backward runs the detection here: its rows are read by this unit alone.
        columns, det_rows = _detect(ctx, params, lambda columns, batch: heartbeat())
        det = msd.fold_detection(params, det_rows, columns, msd.wafer_roots(anc, lin.get("root")))
        defective = det["det"].get("defective", {})
        # Detected lots that are not seeds (container mode) have no lineage: no attribution.
        members = {lot: [lot, *anc[lot]] for lot in {str(r[0]) for r in det_rows} if lot in anc}
        table, (nodes, machines, equipment) = _chunk_keys(ctx)
        attributed = {lot: members[lot] for lot in defective if lot in members}
        backward = {"part": det,
                    "key_cells": [[table[k], *v] for k, v in
                                  msd_lots.lot_cells(msd_lots.lot_unions(attributed, nodes), defective).items()],
                    "eqid": [msd_lots.untag(table[k]) for k in msd_lots.reached(attributed, machines)]}
        rows = detailrows.backward_rows(det_rows, columns, msd_lots.lot_unions(members, equipment), lin)
    sort, cells = detailrows.store_rows(
        store.redis, MsdKeys(store.settings.key_prefix).rows(job_id), chunk, rows, store.settings.job_ttl_s,
        charge=lambda n: store.charge(job_id, n))
    ctx.set_partial(DetailPartial(sort, cells, **backward).pack())


def finalize_unit(ctx: TraceUnit, params) -> None:
    """Chunk 0: the final reduce (:func:`.reduce.finalize_job`); chunk 1 (chunk 0 in a one-chunk
    job): the detail orderings (:func:`.reduce.orderings_unit`), in parallel with it."""
    if ctx.chunk == min(1, ctx.plan.n_chunks - 1):
        reduce.orderings_unit(ctx.store, ctx.job_id)
    if ctx.chunk == 0:
        reduce.finalize_job(ctx.store, ctx.job_id, ctx.app, params)
