"""The MSD events job: ``POST /api/trace/events`` with profile ``mid_section_defect`` as a staged job.

At submit (:mod:`.plan`) the lineage is resolved (the request's ``lineage``, else the lineage
stage's answer by ``lineage_query_id``, else the source) and the fetch set (seeds first, then
the other lineage CIDs) becomes the job's items. Its sections and stages:

========================  ======  ==========================================================
section                   stage   one unit per CID chunk ``c``
========================  ======  ==========================================================
``detection``             1       detection rows of the chunk's seeds (container mode: of the
                                  whole chunk) stored as chunks; a detection partial
``context``               2       unit of chunk 0 only: merges the detection partials and
                                  stores each chunk's context (ancestor -> defective lots)
``<domain>`` ...          3       event rows of the chunk folded into an events partial, and
                                  each CID's own record (machines, materials, equipment ids;
                                  forward: downstream) for the detail; rows are not stored
``detail``                4       detail rows of the lots of chunk ``c`` (detection rows +
                                  the union of their lineage's CID records); sort keys as
                                  the partial
``aggregate``             5       unit of chunk 0 only: merges every partial one at a time,
                                  finalizes the aggregation, quality_meta, the detail orderings
========================  ======  ==========================================================

The stage gates replace locks: the contexts are computed once, by one unit, after every
detection unit settled, and no events unit starts before they are stored. Non-working units
of ``context`` and ``aggregate`` return at once (a few Redis round trips each).

Units (:mod:`.units`) are fenced by the job layer: a partial is committed with the unit's
chunks in one step, and a re-run replaces it. Per-CID records, detail rows and artifacts are
keyed by CID, row id or chunk and computed deterministically from the same inputs, so a re-run
or a late zombie attempt rewrites the same values.

Memory of the final reduce (:mod:`.reduce`) grows with the merged partial (see
:mod:`tracebus.trace.msd`: Σ over machine/material keys of the defective lots reaching them,
one record per defective lot, plus per-day/reason/machine counters; not with event rows)
plus one small sort record per detail row (lot x reason) for the orderings.

Redis holds, per job: the detection rows (as chunks), one record per fetched CID and domain,
one stored detail row per lot x reason (without its upstream lists, which are unioned from
the CID records when a page is read), five packed orderings, and small artifacts.
"""
