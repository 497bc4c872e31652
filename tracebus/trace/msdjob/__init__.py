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
                                  (backward reads only the columns it folds:
                                  ``EventSource.backward_rows``)
``detail``                4       detail rows of the lots of chunk ``c`` (detection rows +
                                  the union of their lineage's CID records); sort keys as
                                  the partial
``aggregate``             5       units ``b`` < n_buckets (<= 8): merge bucket ``b`` of the
                                  events' lot sets (by machine name / part) into output cells;
                                  the next unit: the detail orderings (:mod:`.reduce`)
``finalize``              6       unit of chunk 0 only: merges detection partials, bucket
                                  cells and row counts; the aggregation and quality_meta
========================  ======  ==========================================================

The stage gates replace locks: the contexts are computed once, by one unit, after every
detection unit settled, and no events unit starts before they are stored. Non-working units
of ``context``, ``aggregate`` and ``finalize`` return at once (a few Redis round trips each).

Units (:mod:`.units`) are fenced by the job layer: a partial is committed with the unit's
chunks in one step, and a re-run replaces it. Per-CID records, detail rows and artifacts are
keyed by CID, row id or chunk and computed deterministically from the same inputs, so a re-run
or a late zombie attempt rewrites the same values.

Memory of the reduce (:mod:`.reduce`): a bucket unit holds 1/n_buckets of Σ over machine and
material keys of the distinct defective lots reaching them (lots as ints); the orderings unit
one small sort record per detail row (lot x reason); the finalize the merged detection partial
(one record per defective lot, per-day/reason/machine counters) and the output cells. None
grows with event rows.

Redis holds, per job: the detection rows (as chunks), one record per fetched CID and domain
(backward: its machines and materials, and apart from them its equipment ids, which is all a
detail unit reads of it), the events units' lot sets by bucket, one stored detail row per
lot x reason (without its upstream lists, which are unioned from the CID records when a page
is read), five packed orderings, and small artifacts.
"""
