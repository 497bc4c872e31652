"""The reduce of an MSD job: the detail orderings, and the finalize beside them.

Backward, the aggregation's big part is already reduced per chunk: each ``detail`` unit left
``keys``, per output key the (lots, Σ lot_defect, Σ lot_input) of its own defective lots
(:mod:`tracebus.trace.msd.lots`), and lots are partitioned by chunk, so the finalize only adds
them up. In the ``finalize`` stage the chunk-1 unit builds the detail orderings
(:func:`orderings_unit`) while the chunk-0 unit (:func:`finalize_job`) merges the detection
partials, the events' descriptions and row counts, and the detail units' cells, and finalizes.

Memory, per unit:

* the orderings unit — one value per sort key, two small ints and the row id per detail row
  (lot x reason), and the job's distinct lots;
* the finalize — the merged detection partial (counters per day / reason / detection
  machine / workflow / wafer root; forward, also one record per defect lot), the smallest
  description per material key, and one cell per output key (machine, attribution
  (group, name, id), part, part x material lot) and equipment id reached. Backward, none of
  it grows with event rows or with lots; forward partials (lot sets per downstream group) are
  reduced whole here.
"""

from __future__ import annotations

import logging
import time
from array import array

from tracebus.jobs.states import UnitState
from tracebus.trace import msd
from tracebus.trace.msd.keys import MsdKeys
from tracebus.trace.msd import lots as msd_lots
from tracebus.trace.msd import partial as msd_partial
from tracebus.trace.msd import quality_meta
from tracebus.trace.msd.job.detailrows import CHUNK_SHIFT, SORT_KEYS
from tracebus.trace.msd.job.partials import DetailPartial, DetectionPartial, EventsPartial
from tracebus.trace.msd.job.plan import DETAIL, DETECTION, INTERNAL_SECTIONS, index_job, pack

log = logging.getLogger(__name__)


class AggregationFailed(Exception):
    """The aggregation cannot be computed (a detection or detail unit failed); not retried."""

    retryable = False


def orderings_unit(store, job_id: str) -> None:
    """One ascending array of row ids per sort key (ties: lot, then reason), and the filter cells.

    Memory: per detail row, one value per sort key, two small ints and the row id; plus the
    job's distinct lots (see :func:`.detailrows.sort_columns`).
    """
    plan = store.plan(job_id)
    ids = array("I")
    values: list[list] = [[] for _ in SORT_KEYS]
    lot_ids: dict[str, int] = {}
    reason_ids: dict[str, int] = {}
    lots, reasons = array("I"), array("I")
    cells: dict[tuple, int] = {}
    for unit, raw in store.iter_partials(job_id):
        if plan.section_of(unit) != DETAIL:
            continue
        value = DetailPartial.unpack(raw)
        sort, first = value.sort, plan.chunk_of(unit) << CHUNK_SHIFT
        ids.extend(range(first, first + len(sort["lot"])))
        for column, more in zip(values, sort["v"]):
            column.extend(more)
        here = [lot_ids.setdefault(name, len(lot_ids)) for name in sort["lots"]]
        lots.extend(map(here.__getitem__, sort["lot"]))
        here = [reason_ids.setdefault(name, len(reason_ids)) for name in sort["reasons"]]
        reasons.extend(map(here.__getitem__, sort["reason"]))
        for kind, pj, pkg, reason_set, n in value.filter_cells:
            cell = (kind, pj, pkg, tuple(reason_set))
            cells[cell] = cells.get(cell, 0) + n
    # Ties go by lot, then reason: order the rows by those once (one int per row from the
    # ranks of the names), then per key by the value alone: a stable sort keeps that order
    # among equal values, which is the order of (value, lot, reason) without tuple keys.
    lot_rank, reason_rank = _ranks(lot_ids), _ranks(reason_ids)
    width = len(reason_ids) or 1
    tie = [lot_rank[lot] * width + reason_rank[reason] for lot, reason in zip(lots, reasons)]
    base = sorted(range(len(tie)), key=tie.__getitem__)
    del tie, lots, reasons
    keys = MsdKeys(store.settings.key_prefix)
    ttl = store.settings.job_ttl_s
    pipe = store.redis.pipeline(transaction=False)
    for column, sort_key in zip(values, SORT_KEYS):
        ordered = array("I", map(ids.__getitem__, sorted(base, key=column.__getitem__)))
        store.charge(job_id, ordered.itemsize * len(ordered))
        pipe.set(keys.order(job_id, sort_key), ordered.tobytes(), ex=ttl)
    pipe.execute()
    store.put_artifact(job_id, "detail_cells", pack([[*c, n] for c, n in cells.items()]))
    store.put_artifact(job_id, "detail_total", pack(sum(n for c, n in cells.items() if c[0] != "f")))


def _ranks(ids: dict[str, int]) -> list[int]:
    """Per id (``name -> id``), the rank of its name in sorted order."""
    out = [0] * len(ids)
    for rank, name in enumerate(sorted(ids)):
        out[ids[name]] = rank
    return out


def finalize_job(store, job_id: str, app: dict, params) -> dict:
    """Merge, finalize and store the aggregation and quality_meta; return the aggregation."""
    started = time.monotonic()
    info = app["msd"]
    plan = store.plan(job_id)
    failed = {u["unit"] for u in store.detail(job_id)["units"] if u["state"] == UnitState.FAILED}
    broken = sorted({plan.section_of(u) for u in failed} & set(INTERNAL_SECTIONS))
    if broken:
        raise AggregationFailed(f"MSD aggregation failed: units of {', '.join(broken)} failed")
    merged = Accumulator(params.direction)
    observed = {d: 0 for d in info["domains"]}
    cells: dict = {}
    eqid: dict = {}
    for unit, raw in store.iter_partials(job_id):
        section, part = plan.section_of(unit), None
        if section == DETAIL:
            detail = DetailPartial.unpack(raw)
            msd_lots.add_cells(cells, detail.key_cells)
            eqid.update(dict.fromkeys(detail.eqid, 1))
            part = detail.part
        elif section == DETECTION:
            part = DetectionPartial.unpack(raw).part
        elif section in observed:
            events = EventsPartial.unpack(raw)
            observed[section] += events.rows
            part = events.part
        if part is not None:
            if params.direction == "backward":  # only the detail units needed each lot's record
                part.get("det", {}).pop("defective", None)
            merged.add(part)
        del part
    domain_metas = _domain_metas(store, job_id, plan, info["domains"], observed, failed)
    result = merged.result()
    if params.direction == "backward":
        result["ev"] = {"desc": result["ev"].get("desc", {}), "eqid": eqid}
        aggregation = msd.finalize(result, params, trace_query_id=info["trace_query_id"],
                                   cells=msd_lots.output_cells(cells))
    else:
        aggregation = msd.finalize(result, params, trace_query_id=info["trace_query_id"])
    aggregation["domain_quality_meta"] = domain_metas
    store.put_artifact(job_id, "aggregation", pack(aggregation))
    store.put_artifact(job_id, "quality", pack({"query": quality_meta.merge(domain_metas.values()),
                                                "domains": domain_metas, "observed": observed}))
    keys = MsdKeys(store.settings.key_prefix)
    index_job(store.redis, keys.index(info["trace_query_id"]), store.status(job_id)["user"], job_id,
              store.settings.job_ttl_s)
    log.info("job %s: MSD finalize in %.2f s", job_id, time.monotonic() - started)
    return aggregation


def _domain_metas(store, job_id, plan, domains, observed, failed) -> dict:
    """Per domain: complete, partial (failed units: their first/last CID), or failed (all)."""
    out = {}
    for domain in domains:
        units = plan.units_of(domain)
        chunks = [store.load_input(job_id, u) for u in units if u in failed]
        whole = len(chunks) == len(units)
        out[domain] = quality_meta.domain_meta(domain, observed_rows=observed[domain],
                                               failed_chunks=[] if whole else chunks,
                                               error="domain_fetch_failed" if whole and chunks else None)
    return out


class Accumulator:
    """:func:`tracebus.trace.msd.merge` of many partials, in place and cheaper at scale: lists
    are kept as sets while merging, so none is re-sorted per partial, and sorted once at the
    end (the result equals ``merge_all``'s)."""

    def __init__(self, direction: str):
        self.direction = direction
        self.value: dict = {"det": {}, "ev": {}}

    def add(self, partial: dict) -> None:
        if partial.get("dir") != self.direction or partial.get("v") != msd_partial.VERSION:
            raise AggregationFailed(f"a {partial.get('dir')} partial in a {self.direction} job")
        for part in ("det", "ev"):
            self._merge(self.value[part], partial.get(part, {}))

    def _merge(self, acc: dict, new: dict) -> None:
        for k, v in new.items():
            if isinstance(v, dict):
                self._merge(acc.setdefault(k, {}), v)
            elif isinstance(v, list):
                acc.setdefault(k, set()).update(v)
            elif isinstance(v, str):
                acc[k] = min(acc[k], v) if k in acc else v
            else:
                acc[k] = acc.get(k, 0) + v

    def result(self) -> dict:
        """The merged partial."""
        def finish(obj):
            if isinstance(obj, dict):
                return {k: finish(v) for k, v in obj.items()}
            return sorted(obj) if isinstance(obj, set) else obj
        return {"v": msd_partial.VERSION, "dir": self.direction,
                "det": finish(self.value["det"]), "ev": finish(self.value["ev"])}
