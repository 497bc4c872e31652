"""The trace application: its job kinds, the event sources (SQLite, Oracle) and sample data.

Built on the job layer (:mod:`tracebus.jobs`). Each job kind is a folder:

* :mod:`.events` -- a trace-events request: one section per event domain, the container ids
  as items, a unit streams one domain's rows for one CID chunk;
* :mod:`.stages` -- the MSD page's seed-resolve and lineage stages, and their one-unit jobs;
* :mod:`.msd` -- the mid-section-defect analysis: the pure, mergeable library, and the staged
  job that runs it (:mod:`.msd.job`);
* :mod:`.query` -- the declared query kinds (the query-tool page's reports).

Beside them: the sources (:mod:`.sources`), the synthetic sample data (:mod:`.synth`), the
service behind the HTTP API and the CLI (:mod:`.service`, :mod:`.generic_jobs`), the result
writers (:mod:`.ndjson`, :mod:`.fullresult`, :mod:`.jobview`, :mod:`.dashview`), and the
worker's module (:mod:`.tasks`: ``tracebus worker tracebus.trace.tasks`` runs every kind's units).
"""
