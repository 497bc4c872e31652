"""The MSD events job: ``POST /api/trace/events`` with profile ``mid_section_defect`` as a staged job.

At submit (:mod:`.plan`) the lineage is resolved (the request's ``lineage``, else the lineage
stage's answer by ``lineage_query_id``, else the source) and becomes the job's items and the
artifacts its units read. The two directions are staged differently.

**Backward** partitions the *lots*: the items are the seeds ordered by wafer root (lots of one
root share most ancestors), then, in container mode, the rest of the fetch set. A chunk's
nodes are its seeds and their ancestors (``nodes:<c>``; the sample's 68,475 seeds in chunks of
1,000 read 114,928 nodes for a fetch set of 114,222).

========================  ======  ==========================================================
section                   stage   one unit per chunk ``c``
========================  ======  ==========================================================
``<domain>`` ...          1       the domain's rows of the chunk's nodes folded into each
                                  node's output keys (:mod:`tracebus.trace.msd.lots`), left
                                  in the partial; each owned node's record for detail pages
``detail``                2       the chunk's detection (query and fold); per lot, the union
                                  of its nodes' keys, and per key the (lots, defect, input)
                                  of the chunk's defective lots; the detail rows
``finalize``              3       chunk 0: sums the cells and merges the detection partials
                                  (the final reduce); chunk 1: the detail orderings
========================  ======  ==========================================================

A lot belongs to one chunk, so the cells of the chunks add up: no set of lots leaves a unit.

**Forward** partitions the fetch set (seeds, then their descendants, BFS):

========================  ======  ==========================================================
section                   stage   one unit per CID chunk ``c``
========================  ======  ==========================================================
``detection``             1       detection rows of the chunk's seeds (container mode: of the
                                  whole chunk) stored as chunks; a detection partial
``context``               2       chunk 0 only: merges the detection partials and stores each
                                  chunk's context (descendant -> defect seed)
``<domain>`` ...          3       event rows folded into an events partial and each defect
                                  lot's downstream record
``detail``                4       detail rows of the chunk's defect lots
``finalize``              5       as backward (chunk 0: merge and finalize; chunk 1: orderings)
========================  ======  ==========================================================

The stage gates replace locks: what a unit reads was settled in an earlier stage. Non-working
units (``context`` and ``finalize`` beyond their chunks) return at once.

Units (:mod:`.units`) are fenced by the job layer: a partial is committed with the unit's
chunks in one step, and a re-run replaces it. Per-CID records, detail rows and artifacts are
keyed by CID, row id or chunk and computed deterministically from the same inputs, so a re-run
or a late zombie attempt rewrites the same values.

Memory of the reduce (:mod:`.reduce`): the finalize holds the merged detection partial
(per-day / reason / detection-machine / workflow / root counters; forward, one record per
defect lot) and one cell per output key; the orderings unit one value per sort key and two
small ints per detail row (lot x reason). Neither grows with event rows.

Redis holds, per job: one record per fetched CID and domain (its machines and materials, for
detail pages), the units' partials (backward events partials carry their nodes' key ids), one
stored detail row per lot x reason (without its upstream lists, which are unioned from the
CID records when a page is read), five packed orderings, and small artifacts; forward, also
the detection rows (as chunks).
"""
