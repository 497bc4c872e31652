"""The generic job layer: a job is units, on top of the engine.

A job kind describes a job as a :class:`~tracebus.jobs.spec.JobSpec` (sections x item
chunks, optional stages); this layer admits it (quota, single-flight), schedules its units
within a per-job in-flight cap, fences every unit attempt's result chunks and partial
aggregate, and keeps its state, progress, cancel, retry, timeout, TTLs and metrics. It knows
nothing of any application or of HTTP.
"""
