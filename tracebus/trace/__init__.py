"""The trace application: its job kinds, the event sources (SQLite, PostgreSQL, Oracle) and sample data.

Built on the job layer (:mod:`tracebus.jobs`). Each job kind is a folder whose ``kind.py``
implements the protocol of :mod:`.kinds` and registers it (:mod:`.installed` imports them all):

* :mod:`.events` -- a trace-events request: one section per event domain, the container ids
  as items, a unit streams one domain's rows for one CID chunk;
* :mod:`.stages` -- the MSD page's seed-resolve and lineage stages, and their one-unit jobs;
* :mod:`.msd` -- the mid-section-defect analysis: the pure, mergeable library, and the staged
  job that runs it (:mod:`.msd.job`);
* :mod:`.query` -- the declared query kinds (the query-tool page's reports).

Each kind's own reads of the DWH (statements and how their rows come back) are in its folder.
Beside them: the events request the events and MSD kinds share (:mod:`.request`), the sources
(:mod:`.sources`: a connection, its dialect and one statement run, plus the reads kinds share:
the event domains, the lineage), the synthetic sample data (:mod:`.synth`), the
service behind the HTTP API and the CLI (:mod:`.service`, :mod:`.generic_jobs`) and the result
writers (:mod:`.ndjson`, :mod:`.fullresult`, :mod:`.jobview`, :mod:`.dashview`), which dispatch
through a job's kind, what a unit runs with (:mod:`.runtime`), and the worker's module
(:mod:`.tasks`: ``tracebus worker tracebus.trace.tasks`` runs every kind's units).
"""
