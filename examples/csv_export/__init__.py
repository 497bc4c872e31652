"""A second kind of job: export the result of any SQL query to CSV, page by page.

The whole application is this package, about a hundred lines on top of
:mod:`tracebus.jobs`, and it needed no change to the job layer or the engine: it
describes its jobs as a :class:`~tracebus.jobs.spec.JobSpec` (one section, ``rows``; one
item per page of the query), declares its unit handler with
:func:`~tracebus.jobs.actor.unit_actor`, and reads the stored chunks back as CSV. Every
page is a unit, so a worker holds one page at a time and a crash loses at most one page.

Run its workers with ``tracebus worker examples.csv_export.app --queues csv-export``.
"""
