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
                                  stores each chunk's context (ancestor -> lots) as an artifact
``<domain>`` ...          3       event rows of the chunk folded into an events partial and
                                  per-lot records (bucketed by the lot's chunk); rows not stored
``detail``                4       detail rows of the lots of chunk ``c`` (detection rows +
                                  records from every events unit); their sort keys as partial
``aggregate``             5       unit of chunk 0 only: merges every partial one at a time,
                                  finalizes the aggregation, quality_meta, the detail orderings
========================  ======  ==========================================================

Units (:mod:`.units`) are fenced by the job layer: a partial is committed with the unit's
chunks in one step, and a re-run replaces it. Per-lot records and artifacts are keyed by unit
or chunk and computed deterministically, so a re-run or a late zombie attempt rewrites the
same value.

Memory of the final reduce (:mod:`.reduce`) grows with the merged partial (see
:mod:`tracebus.trace.msd`: Σ over machine/material keys of the defective lots reaching them,
one record per defective lot, plus per-day/reason/machine counters; not with event rows)
plus one small sort record per detail row (lot x reason) for the orderings.
"""
