"""The trace application: event domains, sources (SQLite, Oracle), synthetic data, MSD.

Built on the job layer (:mod:`tracebus.jobs`): a trace request becomes a job whose sections
are its domains and whose items are its container ids; its unit handler streams one
domain's rows for one CID chunk from the source (:mod:`tracebus.trace.tasks`). The
mid-section-defect analysis (:mod:`tracebus.trace.msd`) adds mergeable per-unit partials.
"""
