"""MSD aggregation as a pure, mergeable, chunk-invariant library (MSD.md §1-3).

The MSD job kind's folder: this library, the staged job that drives it (:mod:`.job`) and the
page's lookups (:mod:`.lookups`).

No Redis, no I/O. The job layer drives it in four steps:

1. ``params = MsdParams.from_params(payload["params"])``;
   ``det = fold_detection(params, rows, columns, wafer_roots(ancestors, seed_roots))`` per detection
   chunk (chunks partition CIDs), merged with :func:`merge`.
2. Per events unit (one domain × one CID chunk): ``context = forward_context(chunk,
   forward_seed_map(seeds, children_map, defect), defect)`` (backward: the per-CID context of
   tests/msd_reference.py); then ``p = fold(context, params.direction, batches)``. ``p`` is
   plain data (dict/list/str/int/float, sets as sorted lists) and is stored as msgpack as it is.
3. ``merge(a, b)`` — associative and commutative; a unit that ran twice *replaces* its partial.
4. ``finalize(merged, params, resource_families=…, trace_query_id=…)`` → the aggregation dict.

The backward job takes a cheaper road to the same answer (:mod:`.lots`): it partitions lots
instead of CIDs, so each unit sums its lots into per-key cells and ``finalize`` is given the
summed cells; the steps above stay the reference it is tested against (the backward per-CID
context and detail rows live with the tests, tests/msd_reference.py, since only they use them).

Memory of the reduce (the merged partial) grows with:

* backward — Σ over machine keys (group, name, id) and material keys (part, lot) of the distinct
  defective lots reaching the key, plus one entry per defective lot (``det.defective``), per
  distinct material key (description), per distinct EQUIPMENTID reached, and per day / reason /
  detection machine / workflow / wafer root;
* forward — Σ over downstream groups of the distinct defect seeds reaching the group
  (``lots_reached``), plus Σ over groups of the (defect seed × downstream reason) pairs with a
  reject (for the reason matrix), one record per defect lot with its reasons, and per group ×
  machine, group × reason, group × day.

It does not grow with event rows, and not with non-defective lots except through the counters.

Deliberate differences from the original, all for order independence: ties in every ranking are
broken by name (the original left them to DuckDB or dict order); MATERIAL_PART_DESC is the
smallest non-empty description of the key (the original's "first"); a forward descendant shared
by two defect seeds goes to the later seed in seed order. All rates use Python ``round``; the
original's detail ``DEFECT_RATE`` used DuckDB ``ROUND`` (half away from zero), which differs only
on exact binary ties.
"""

from __future__ import annotations

from typing import Any, Mapping

from tracebus.trace.msd.backward import finalize_backward
from tracebus.trace.msd.detection import DETECTION_COLUMNS, defective_lots, fold_detection
from tracebus.trace.msd.events import fold, forward_context, forward_seed_map, wafer_roots
from tracebus.trace.msd.forward import finalize_forward
from tracebus.trace.msd.params import (MsdParams, detection_hash, normalize_stations, parse_loss_reasons, trace_query_id)
from tracebus.trace.msd.partial import empty, merge, merge_all, merge_data

__all__ = [
    "DETECTION_COLUMNS", "MsdParams", "defective_lots", "detection_hash",
    "empty", "finalize", "fold", "fold_detection", "forward_context", "forward_seed_map", "merge",
    "merge_all", "merge_data", "normalize_stations", "parse_loss_reasons", "trace_query_id", "wafer_roots",
]


def finalize(partial: Mapping[str, Any], params: MsdParams, *,
             resource_families: Mapping[str, str] | None = None,
             lineage_available: bool = True, trace_query_id: str = "", cells=None) -> dict:
    """Turn a merged partial (detection and events parts) into the aggregation dict.

    Args:
        partial: every detection and events partial of the job, merged.
        params: the parsed parameters (direction, masks, station).
        resource_families: backward only: EQUIPMENTID → RESOURCEFAMILYNAME; missing → ``(未知)``.
        lineage_available: backward only: False when there were no lineage rows, which empties
            the lineage-based charts and zeroes ``affected_machine_count`` as the original does.
        trace_query_id: copied into the result.
        cells: backward only: :func:`.backward.key_cells` computed already (per bucket).
    """
    if params.direction == "forward":
        return finalize_forward(partial, params, trace_query_id=trace_query_id)
    return finalize_backward(partial, params, resource_families=resource_families,
                             lineage_available=lineage_available, trace_query_id=trace_query_id, cells=cells)
