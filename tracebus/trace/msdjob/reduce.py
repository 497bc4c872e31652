"""The reduce of an MSD job, in two stages: buckets and orderings in parallel, then the finalize.

Backward, the big part of the merged partial is ``mach`` / ``mat``: per machine key or
material key, the set of defective lots reaching it. Every output key (by_machine's name,
attribution's (group, name, id), by_material's part, ...) depends only on the stored keys with
the same machine name or part, so the events units split their ``ev`` part into
:func:`n_buckets` buckets by name / part (:func:`split_ev`), and in the ``aggregate`` stage unit
``b`` merges bucket ``b`` alone and turns it into per-output-key cells ``{n, d, i}``
(:func:`bucket_unit`). One more unit of that stage builds the detail orderings
(:func:`orderings_unit`). The ``finalize`` stage's single unit (:func:`finalize_job`) merges the
detection partials, the small bucket results and the events' row counts, and finalizes.

Memory, per unit:

* a bucket unit — 1/``n_buckets`` of Σ over machine / material keys of the distinct
  defective lots reaching each key (lots are ints: positions in the job's items);
* the orderings unit — one sort record per detail row (lot x reason);
* the finalize — the merged detection partial (one record per defective lot, counters per
  day / reason / detection machine / workflow / wafer root) plus the output cells. Not event
  rows, and not lot sets (forward jobs, whose partials are smaller, are reduced whole here).
"""

from __future__ import annotations

import logging
import time
import zlib
from array import array

from tracebus.trace import msd
from tracebus.trace.keys import TraceKeys
from tracebus.trace.msd import partial as msd_partial
from tracebus.trace.msd import quality_meta
from tracebus.trace.msd._util import unkey
from tracebus.trace.msd.backward import key_cells
from tracebus.trace.msdjob.detailrows import SORT_KEYS
from tracebus.trace.msdjob.plan import AGGREGATE, DETAIL, DETECTION, INTERNAL_SECTIONS, pack, unpack

log = logging.getLogger(__name__)
MAX_BUCKETS = 8
_CELLS = ("machine", "material", "attr", "mattr")


class AggregationFailed(Exception):
    """The aggregation cannot be computed (a detection or detail unit failed); not retried."""

    retryable = False


def n_buckets(plan) -> int:
    """Buckets of the events' lot sets: one ``aggregate`` unit each, the last unit (if there is
    another) builds the orderings."""
    return max(1, min(MAX_BUCKETS, plan.n_chunks - 1))


def _bucket(text: str, n: int) -> int:
    return zlib.crc32(text.encode("utf-8")) % n  # hash() is salted per process


def split_ev(ev: dict, n: int) -> dict[int, dict]:
    """A backward ``ev`` part split into buckets: ``mach`` by machine name, ``mat`` and ``desc``
    by part, ``eqid`` by equipment id. The lot sets of ``mach`` and ``mat`` are stored as packed
    uint32 arrays (:func:`pack_lots`), not msgpack lists: they are most of what an events unit
    writes and a bucket unit reads, and an array packs and unpacks in C."""
    out: dict[int, dict] = {}
    for part, pick in (("mach", 1), ("mat", 0)):
        for k, v in ev.get(part, {}).items():
            out.setdefault(_bucket(unkey(k)[pick], n), {}).setdefault(part, {})[k] = pack_lots(v)
    for k, v in ev.get("desc", {}).items():
        out.setdefault(_bucket(unkey(k)[0], n), {}).setdefault("desc", {})[k] = v
    for k, v in ev.get("eqid", {}).items():
        out.setdefault(_bucket(k, n), {}).setdefault("eqid", {})[k] = v
    return out


def pack_lots(lots) -> bytes:
    """A set of lot positions as native uint32s."""
    return array("I", lots).tobytes()


def _unpack_lots(blob: bytes) -> array:
    lots = array("I")
    lots.frombytes(blob)
    return lots


def bucket_unit(store, job_id: str, params, bucket: int) -> dict:
    """Merge bucket ``bucket`` of every events unit and compute its output cells."""
    ev: dict = {"mach": {}, "mat": {}, "desc": {}, "eqid": {}}
    for raw in store.redis.hvals(TraceKeys(store.settings.key_prefix).msd_ev(job_id, bucket)):
        part = unpack(raw)
        for name in ("mach", "mat"):
            merged = ev[name]
            for k, blob in part.get(name, {}).items():
                lots = merged.get(k)
                if lots is None:
                    merged[k] = set(_unpack_lots(blob))
                else:
                    lots.update(_unpack_lots(blob))
        desc = ev["desc"]
        for k, d in part.get("desc", {}).items():
            desc[k] = min(desc[k], d) if k in desc else d
        ev["eqid"].update(part.get("eqid", {}))
    defective = unpack(store.get_artifact(job_id, "defective"), {})
    cells = key_cells(ev, params.upstream_groups, defective)
    return {"cells": {name: [[list(k) if isinstance(k, tuple) else k, c["n"], c["d"], c["i"]]
                             for k, c in cells[name].items()] for name in _CELLS},
            "desc": ev["desc"], "eqid": sorted(ev["eqid"])}


def orderings_unit(store, job_id: str) -> None:
    """One ascending array of row ids per sort key (ties: lot, then reason), and the filter cells."""
    plan = store.plan(job_id)
    sorts: list = []
    cells: dict[tuple, int] = {}
    for unit, raw in store.iter_partials(job_id):
        if plan.section_of(unit) != DETAIL:
            continue
        value = unpack(raw)
        sorts.extend(value["sort"])
        for kind, pj, pkg, reasons, n in value["cells"]:
            cell = (kind, pj, pkg, tuple(reasons))
            cells[cell] = cells.get(cell, 0) + n
    keys = TraceKeys(store.settings.key_prefix)
    ttl = store.settings.job_ttl_s
    pipe = store.redis.pipeline(transaction=False)
    for i, sort_key in enumerate(SORT_KEYS, start=1):
        sorts.sort(key=lambda r, i=i: (r[i], r[-2], r[-1]))
        pipe.set(keys.msd_order(job_id, sort_key), array("I", (r[0] for r in sorts)).tobytes(), ex=ttl)
    pipe.execute()
    store.put_artifact(job_id, "detail_cells", pack([[*c, n] for c, n in cells.items()]))
    store.put_artifact(job_id, "detail_total", pack(sum(n for c, n in cells.items() if c[0] != "f")))


def finalize_job(store, job_id: str, app: dict, params) -> dict:
    """Merge, finalize and store the aggregation and quality_meta; return the aggregation."""
    started = time.monotonic()
    info = app["msd"]
    plan = store.plan(job_id)
    failed = {u["unit"] for u in store.detail(job_id)["units"] if u["state"] == "failed"}
    broken = sorted({plan.section_of(u) for u in failed} & set(INTERNAL_SECTIONS))
    if broken:
        raise AggregationFailed(f"MSD aggregation failed: units of {', '.join(broken)} failed")
    merged = Accumulator(params.direction)
    observed = {d: 0 for d in info["domains"]}
    cells: dict[str, dict] = {name: {} for name in _CELLS}
    extra: dict = {"desc": {}, "eqid": {}}
    for unit, raw in store.iter_partials(job_id):
        section, value = plan.section_of(unit), unpack(raw)
        if section == AGGREGATE and "cells" in value:
            for name in _CELLS:
                for k, n, d, i in value["cells"][name]:
                    cells[name][tuple(k) if isinstance(k, list) else k] = {"n": n, "d": d, "i": i}
            extra["desc"].update(value["desc"])
            extra["eqid"].update(dict.fromkeys(value["eqid"], 1))
        elif section == DETECTION or section in observed:
            merged.add(value["p"])
            observed[section] = observed.get(section, 0) + value.get("rows", 0)
        del value
    domain_metas = _domain_metas(store, job_id, plan, info["domains"], observed, failed)
    result = merged.result()
    if params.direction == "backward":
        result["ev"] = extra
        aggregation = msd.finalize(result, params, trace_query_id=info["trace_query_id"], cells=cells)
    else:
        aggregation = msd.finalize(result, params, trace_query_id=info["trace_query_id"])
    aggregation["domain_quality_meta"] = domain_metas
    store.put_artifact(job_id, "aggregation", pack(aggregation))
    store.put_artifact(job_id, "quality", pack({"query": quality_meta.merge(domain_metas.values()),
                                                "domains": domain_metas, "observed": observed}))
    keys = TraceKeys(store.settings.key_prefix)
    store.redis.set(keys.msd_index(info["trace_query_id"]), job_id, ex=store.settings.job_ttl_s)
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
