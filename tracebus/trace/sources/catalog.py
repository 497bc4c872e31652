"""The statements the shared reads send, one per kind, with example binds: for review and checks.

:func:`statements` builds each kind from the same builder the source calls (:mod:`.queries`
for the event domains, :mod:`.lineage_sql` for the lineage), for two example CIDs (or names),
so the text is the one a DBA would see on the wire, only the IN lists shorter. A kind's own
reads list theirs beside them (:meth:`tracebus.trace.jobkind.JobKind.statements`, with the
examples and :class:`Statement` of this module), and :func:`tracebus.trace.statements.every_statement`
joins the two: ``tracebus sql`` prints them (``--explain`` runs ``EXPLAIN PLAN`` for each on
Oracle), ``tests/test_dwh_schema.py`` qualifies each against the real schema, ``bench
source-cost`` reads their access paths. A statement a source sends that is not listed fails that test.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Callable

from tracebus.trace import domains
from tracebus.trace.sources import lineage_sql
from tracebus.trace.sources.queries import Dialect, builder, jobs_scan_sql, select_sql

#: Example values of the binds: CIDs (16 hex characters, as the DWH's CHAR(16)), names, a window.
EXAMPLE_CIDS = ("48050a1200000001", "48050a1200000002")
EXAMPLE_NAMES = ("GA2501150123-A01", "GA2501150124-A01")
EXAMPLE_WINDOW = ("2025-01-01 00:00:00", "2025-01-11 00:00:00")


@dataclass(frozen=True)
class Statement:
    """One kind of statement: its name, text, example binds and the builder it comes from."""

    name: str
    sql: str
    binds: dict[str, str]
    origin: str  # module:function of the builder

    def to_dict(self) -> dict:
        return {"name": self.name, "sql": self.sql, "binds": self.binds}


def origin_of(func: Callable) -> str:
    """``path.py:line qualname`` of the function that builds a statement."""
    func = inspect.unwrap(func)
    try:
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        line = 0
    return f"{func.__module__.replace('.', '/')}.py:{line} {func.__qualname__}"


def example_binds(values, prefix: str = "p") -> dict[str, str]:
    """``{p0: values[0], p1: ...}``: the binds of an IN list of ``values``."""
    return {f"{prefix}{i}": v for i, v in enumerate(values)}


def statements(d: Dialect) -> list[Statement]:
    """Every kind of statement of the shared reads in dialect ``d``, in a stable order (events,
    lineage)."""
    n = len(EXAMPLE_CIDS)
    cids, names = example_binds(EXAMPLE_CIDS), example_binds(EXAMPLE_NAMES)
    out = [Statement(f"events.{domain}", select_sql(d, domain, n), cids, origin_of(builder(domain)))
           for domain in domains.DOMAINS]

    def add(name: str, build: Callable, sql: str, binds: dict) -> None:
        out.append(Statement(name, sql, binds, origin_of(build)))

    add("events.jobs.scan", jobs_scan_sql, jobs_scan_sql(d), {})
    for name, build, binds in (("snapshot", lineage_sql.snapshot, cids),
                               ("ids_by_name", lineage_sql.ids_by_name, names),
                               ("leaf_serials", lineage_sql.leaf_serials, cids)):
        add(f"lineage.{name}", build, build(d, n), binds)
    add("lineage.merge_sources.wide", lineage_sql.merge_sources_wide, lineage_sql.merge_sources_wide(d, n),
        cids if d.name == "oracle" else {"ids": json.dumps(list(EXAMPLE_CIDS))})
    add("lineage.merge_sources.up", lineage_sql.merge_sources_up, lineage_sql.merge_sources_up(d, n, 19),
        cids if d.name == "oracle" else {})
    add("lineage.descendant_edges", lineage_sql.descendant_edges, lineage_sql.descendant_edges(d, n, 20),
        cids if d.name == "oracle" else {})
    add("lineage.split_descendants", lineage_sql.split_descendants, lineage_sql.split_descendants(d, n, 19),
        cids if d.name == "oracle" else {})
    return out
