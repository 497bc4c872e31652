"""Access paths of the catalog's statements: SQLite's ``EXPLAIN QUERY PLAN``, Oracle's ``EXPLAIN PLAN``,
PostgreSQL's ``EXPLAIN``.

:func:`sqlite_plan`, :func:`oracle_plan` and :func:`postgres_plan` return one :class:`Plan` per
statement: the plan lines as the database prints them and the tables it reads in full (``SCAN
<table>`` without an index in SQLite, ``TABLE ACCESS FULL`` in Oracle, ``Seq Scan`` in PostgreSQL). ``tracebus sql --explain`` prints them;
``bench source-cost`` costs them at the real row counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TABLE_ALIAS = re.compile(r"\b(DW_MES_\w+)(?:\s+(?:AS\s+)?(?!ON\b|WHERE\b|LEFT\b|JOIN\b|GROUP\b|ORDER\b)([A-Za-z]\w*))?")
_DERIVED = re.compile(r"\)\s+(?:AS\s+)?([A-Za-z]\w*)\b")
_USING = re.compile(r" USING (?:COVERING )?INDEX (\w+)")
_SCAN = re.compile(r"^SCAN (\w+)\b")  # the whole table, or the whole of one of its indexes
_SEARCH = re.compile(r"^SEARCH (\w+) USING (?:COVERING |AUTOMATIC COVERING |AUTOMATIC PARTIAL COVERING |)"
                     r"INDEX ?(\w*)")


@dataclass
class Plan:
    """The access path of one statement."""

    lines: list[str]
    full_scans: list[str] = field(default_factory=list)  # tables read in full, once per occurrence
    index_reads: list[tuple[str, str]] = field(default_factory=list)  # (table, index) searched or scanned


def table_aliases(sql: str) -> dict[str, str]:
    """``{alias or table name: table}`` of the DWH tables named in ``sql`` (both dialects).

    An alias that also names a derived table (``(...) r``) is left out: a plan line naming
    it cannot tell which it means (the index it uses does, see :func:`sqlite_plan`).
    """
    derived = set(_DERIVED.findall(sql))
    out: dict[str, str] = {}
    for m in _TABLE_ALIAS.finditer(sql):
        table = m.group(1).split(".")[-1]
        out.setdefault(table, table)
        if m.group(2) and m.group(2) not in derived:
            out.setdefault(m.group(2), table)
    return out


def sqlite_plan(conn, sql: str, binds: dict) -> Plan:
    """``EXPLAIN QUERY PLAN`` of ``sql`` on an SQLite connection, its full scans named by table.

    A ``SCAN x`` whose ``x`` is a DWH table (or its alias) is a full scan, also ``USING INDEX``
    (every entry of the index is read); a scan of a subquery, CTE or derived table is not (its
    rows come from the reads below it). A ``SEARCH`` reads the rows its index condition
    matches; an automatic index is built on a derived table in these statements (the spec
    map, the reject sums) and is not a read of a DWH table.
    """
    aliases = table_aliases(sql)
    indexes = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall())
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, binds).fetchall()
    plan = Plan([" " * 2 * _depth(rows, r) + r[3] for r in rows])
    for r in rows:
        detail = r[3]
        m = _SEARCH.match(detail)
        if m:
            if m.group(2) in indexes:
                plan.index_reads.append((indexes[m.group(2)], m.group(2)))
            continue
        m = _SCAN.match(detail)
        if m:
            index = _USING.search(detail)
            table = indexes.get(index.group(1)) if index else aliases.get(m.group(1))
            if table:
                plan.full_scans.append(table)
    return plan


def _depth(rows, row) -> int:
    parents = {r[0]: r[1] for r in rows}
    depth, parent = 0, row[1]
    while parent in parents:
        depth, parent = depth + 1, parents[parent]
    return depth


def oracle_plan(cursor, sql: str, binds: dict, statement_id: str) -> Plan:
    """``EXPLAIN PLAN`` of ``sql`` on an Oracle cursor (DBMS_XPLAN's text, full scans from PLAN_TABLE).

    The binds are passed only so the driver accepts the statement; EXPLAIN PLAN does not run it.
    The statement's PLAN_TABLE rows are deleted afterwards.
    """
    cursor.execute(f"EXPLAIN PLAN SET STATEMENT_ID = '{statement_id}' FOR {sql}", binds)
    try:
        cursor.execute("SELECT PLAN_TABLE_OUTPUT FROM TABLE(DBMS_XPLAN.DISPLAY('PLAN_TABLE', :sid, 'TYPICAL'))",
                       {"sid": statement_id})
        lines = [r[0] for r in cursor.fetchall()]
        cursor.execute("SELECT OPERATION, OPTIONS, OBJECT_NAME FROM PLAN_TABLE WHERE STATEMENT_ID = :sid "
                       "ORDER BY ID", {"sid": statement_id})
        return oracle_plan_from_rows(lines, cursor.fetchall())
    finally:
        cursor.execute("DELETE FROM PLAN_TABLE WHERE STATEMENT_ID = :sid", {"sid": statement_id})


def oracle_plan_from_rows(lines: list[str], rows: list[tuple]) -> Plan:
    """A :class:`Plan` from DBMS_XPLAN lines and PLAN_TABLE (OPERATION, OPTIONS, OBJECT_NAME) rows."""
    plan = Plan(lines)
    for operation, options, name in rows:
        if operation == "TABLE ACCESS" and (options or "").startswith("FULL"):
            plan.full_scans.append(name)
        elif operation == "INDEX":
            plan.index_reads.append(("", name))
    return plan


_SEQ_SCAN = re.compile(r"\bSeq Scan on (\w+)")


def postgres_plan(conn, sql: str, binds: dict) -> Plan:
    """``EXPLAIN`` of ``sql`` on a psycopg connection (the plan for the example binds, not run),
    its sequential scans named by table (``Seq Scan`` and ``Parallel Seq Scan``), index reads
    from its ``Index Scan``/``Index Only Scan``/``Bitmap Index Scan`` lines."""
    from tracebus.trace.sources.postgres import pg_params

    lines = [r[0] for r in conn.execute("EXPLAIN " + pg_params(sql), binds).fetchall()]
    plan = Plan(lines)
    for line in lines:
        m = _SEQ_SCAN.search(line)
        if m:
            plan.full_scans.append(m.group(1).upper())
        m = re.search(r"\b(?:Index|Index Only) Scan(?: Backward)? using (\w+) on (\w+)", line)
        if m:
            plan.index_reads.append((m.group(2).upper(), m.group(1).upper()))
        m = re.search(r"\bBitmap Index Scan on (\w+)", line)
        if m:
            plan.index_reads.append(("", m.group(1).upper()))
    return plan
