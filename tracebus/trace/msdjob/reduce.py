"""The final reduce of an MSD job: merge every partial, finalize, quality_meta, detail orderings.

Runs once per job, in the unit of chunk 0 of the ``aggregate`` section, after every other
unit settled. Partials are read and merged one at a time (``iter_partials``), so the reduce
holds the merged partial plus one unit's partial. Its memory grows with:

* the merged partial: Σ over (group, machine, id) and (part, lot) keys of the distinct
  defective lots reaching each key, one record per defective lot, and counters per day /
  reason / detection machine / workflow / wafer root (backward); per downstream group the
  defect seeds reaching it and (seed x reason) matrix cells (forward). Not event rows;
* one sort record (row id, five numbers, two short strings) per detail row — lots x
  reasons — to build the five orderings. Rows themselves are never loaded here.

What it stores (all expire with the job): the ``aggregation`` and ``quality`` artifacts, the
``detail_cells`` artifact (rows per filter cell, for ``total_count``) and one packed uint32
array of row ids per sort key.
"""

from __future__ import annotations

import logging
import time
from array import array

from tracebus.trace import msd
from tracebus.trace.keys import TraceKeys
from tracebus.trace.msd import partial as msd_partial
from tracebus.trace.msd import quality_meta
from tracebus.trace.msdjob.detailrows import SORT_KEYS
from tracebus.trace.msdjob.plan import DETAIL, INTERNAL_SECTIONS, pack, unpack

log = logging.getLogger(__name__)


class AggregationFailed(Exception):
    """The aggregation cannot be computed (a detection or detail unit failed); not retried."""

    retryable = False


def reduce_job(store, job_id: str, app: dict, params) -> dict:
    """Merge, finalize and store everything the readers need; return the aggregation."""
    started = time.monotonic()
    info = app["msd"]
    plan = store.plan(job_id)
    failed = _failed_units(store, job_id, plan)
    broken = sorted({plan.section_of(u) for u in failed} & set(INTERNAL_SECTIONS))
    if broken:
        raise AggregationFailed(f"MSD aggregation failed: units of {', '.join(broken)} failed")
    merged = Accumulator(params.direction)
    observed = {d: 0 for d in info["domains"]}
    sorts: list = []
    cells: dict[tuple, int] = {}
    for unit, raw in store.iter_partials(job_id):
        section, value = plan.section_of(unit), unpack(raw)
        if section == DETAIL:
            sorts.extend(value["sort"])
            for kind, pj, pkg, reasons, n in value["cells"]:
                cell = (kind, pj, pkg, tuple(reasons))
                cells[cell] = cells.get(cell, 0) + n
            continue
        merged.add(value["p"])
        if section in observed:
            observed[section] += value.get("rows", 0)
        del value
    domain_metas = {}
    for domain in info["domains"]:
        chunks = [store.load_input(job_id, u) for u in plan.units_of(domain) if u in failed]
        whole = len(chunks) == len(plan.units_of(domain))
        domain_metas[domain] = quality_meta.domain_meta(
            domain, observed_rows=observed[domain], failed_chunks=[] if whole else chunks,
            error="domain_fetch_failed" if whole and chunks else None)
    query_meta = quality_meta.merge(domain_metas.values())
    result = merged.result()
    if params.direction == "backward":  # the events partials name lots by position (see units)
        position = lot_positions(store, job_id, plan, info["seed_count"])
        det = result["det"]
        det["defective"] = {position.get(lot, lot): v for lot, v in det.get("defective", {}).items()}
    aggregation = msd.finalize(result, params, trace_query_id=info["trace_query_id"])
    aggregation["domain_quality_meta"] = domain_metas
    del merged
    _write_orderings(store, job_id, sorts, cells)
    store.put_artifact(job_id, "aggregation", pack(aggregation))
    store.put_artifact(job_id, "quality", pack({"query": query_meta, "domains": domain_metas,
                                                "observed": observed}))
    keys = TraceKeys(store.settings.key_prefix)
    store.redis.set(keys.msd_index(info["trace_query_id"]), job_id, ex=store.settings.job_ttl_s)
    log.info("job %s: MSD reduce in %.2f s (%d detail rows)", job_id, time.monotonic() - started, len(sorts))
    return aggregation


class Accumulator:
    """:func:`tracebus.trace.msd.merge` of many partials, in place and cheaper at scale.

    Lists (lot sets) are kept as sets while merging, so no list is re-sorted per partial (lots
    are integer positions in the job's items, see :mod:`.units`: small to unpack and hash). At
    the end the machine and material lot sets stay sets (the finalize only unions and
    iterates them); every other list is sorted, so the result equals ``merge_all``'s.
    """

    _KEEP_SETS = ("mach", "mat")

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
        """The merged partial (see the class docstring for which lists stay sets)."""
        def finish(obj, keep: bool):
            if isinstance(obj, dict):
                return {k: finish(v, keep or k in self._KEEP_SETS) for k, v in obj.items()}
            if isinstance(obj, set) and not keep:
                return sorted(obj)
            return obj
        return {"v": msd_partial.VERSION, "dir": self.direction,
                "det": finish(self.value["det"], False), "ev": finish(self.value["ev"], False)}


def lot_positions(store, job_id: str, plan, seed_count: int) -> dict[str, int]:
    """Seed CID -> its position in the job's items (seeds come first)."""
    out: dict[str, int] = {}
    for c in range(-(-seed_count // plan.chunk_items)):
        for i, cid in enumerate(store.load_input(job_id, c)):
            out[cid] = c * plan.chunk_items + i
    return out


def _failed_units(store, job_id: str, plan) -> set[int]:
    doc = store.detail(job_id)
    return {u["unit"] for u in doc["units"] if u["state"] == "failed"}


def _write_orderings(store, job_id: str, sorts: list, cells: dict) -> None:
    """One ascending array of row ids per sort key (ties: lot, then reason), and the cells."""
    keys = TraceKeys(store.settings.key_prefix)
    ttl = store.settings.job_ttl_s
    pipe = store.redis.pipeline(transaction=False)
    for i, sort_key in enumerate(SORT_KEYS, start=1):
        sorts.sort(key=lambda r, i=i: (r[i], r[-2], r[-1]))
        pipe.set(keys.msd_order(job_id, sort_key), array("I", (r[0] for r in sorts)).tobytes(), ex=ttl)
    pipe.execute()
    store.put_artifact(job_id, "detail_cells", pack([[*c, n] for c, n in cells.items()]))
    store.put_artifact(job_id, "detail_total", pack(sum(n for c, n in cells.items() if c[0] != "f")))
