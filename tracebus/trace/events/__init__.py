"""The trace-events job kind: ``POST /api/trace/events`` for any profile but MSD's.

One section per event domain, the CIDs as items, one unit per (domain, CID chunk); a unit
streams that domain's rows of its chunk from the source into fenced chunks.
"""
