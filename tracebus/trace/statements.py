"""Every statement tracebus can send to the DWH: the sources' reads and the kinds' own.

``tracebus sql`` prints this list; ``tests/test_dwh_schema.py`` qualifies it against the real
schema. The sources' part is :func:`tracebus.trace.sources.catalog.statements`; the kinds' own
(the declared query kinds', :meth:`tracebus.trace.jobkind.JobKind.statements`) are added here,
above both.
"""

from __future__ import annotations

from tracebus.trace import installed
from tracebus.trace.sources.catalog import Statement, statements
from tracebus.trace.sources.queries import Dialect


def every_statement(d: Dialect) -> list[Statement]:
    """The sources' statements of dialect ``d``, then every installed kind's own."""
    return statements(d) + installed.statements(d)
