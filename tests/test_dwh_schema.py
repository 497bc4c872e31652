"""The embedded database against the real DWH schema (``tests/data/dwh_schema.json``).

The schema file is the dashboard repository's ``data/table_schema_info.json`` without its
sample rows: every table the dashboard reads, with columns, types, indexes and row counts.
The embedded database (the file ``tracebus sample-data`` writes) must have no table,
column or index that the DWH lacks, the real types mapped to SQLite affinities, and every
real index whose columns it carries.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tracebus.trace.sources.queries import ORACLE, SQLITE, TABLES
from tracebus.trace.synth import schema

DWH = json.loads((Path(__file__).parent / "data" / "dwh_schema.json").read_text(encoding="utf-8"))


def affinity(column: dict) -> str:
    """The SQLite affinity of a real column type (schema.py's mapping)."""
    kind = column["data_type"]
    if kind in ("CHAR", "VARCHAR2", "DATE"):
        return "TEXT"
    if kind == "NUMBER":
        return "INTEGER" if column["data_scale"] == 0 else "NUMERIC"
    raise AssertionError(f"no mapping for {kind}")


def real_columns(table: str) -> dict[str, dict]:
    return {c["column_name"]: c for c in DWH[table]["columns"]}


def test_the_sources_read_real_tables_under_their_real_names():
    assert set(TABLES) <= set(DWH)
    assert set(schema.TABLES) == set(TABLES)
    assert dict(SQLITE.tables) == {t: t for t in TABLES}
    assert dict(ORACLE.tables) == {t: f"{DWH[t]['owner']}.{t}" for t in TABLES}


@pytest.mark.parametrize("table", sorted(schema.TABLES))
def test_every_embedded_column_is_real_with_its_type_mapped(table):
    real = real_columns(table)
    for name, kind in schema.TABLES[table]:
        assert name in real, f"{table}.{name} is not a DWH column"
        assert kind == affinity(real[name]), f"{table}.{name}: {kind} for {real[name]['data_type']}"


def _expected_indexes() -> set[tuple[str, str, str, tuple[str, ...]]]:
    out = set()
    for table, cols in schema.TABLES.items():
        have = {c for c, _ in cols}
        for index in DWH[table]["indexes"]:
            if set(index["columns"]) <= have:
                out.add((index["name"], table, index["uniqueness"], tuple(index["columns"])))
    return out


def test_the_indexes_are_exactly_the_real_ones_on_embedded_columns(sample_db):
    conn = sqlite3.connect(sample_db)
    found = set()
    for name, table in conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'"):
        unique = conn.execute(f"SELECT \"unique\" FROM pragma_index_list('{table}') WHERE name = ?",
                              (name,)).fetchone()[0]
        cols = tuple(r[0] for r in conn.execute(f"SELECT name FROM pragma_index_info('{name}') ORDER BY seqno"))
        found.add((name, table, "UNIQUE" if unique else "NONUNIQUE", cols))
    assert found == _expected_indexes()
    # What the real DWH lacks, named: the old embedded indexes of the lineage and detection walks.
    columns = {(t, c[0]) for _, t, _, c in found}
    for lacking in (("DW_MES_CONTAINER", "SPLITFROMID"), ("DW_MES_WIP", "CONTAINERID"),
                    ("DW_MES_PJ_COMBINEDASSYLOTS", "LOTID"), ("DW_MES_JOB", "JOBID")):
        assert lacking not in columns


def test_the_database_has_exactly_the_declared_tables_and_columns(sample_db):
    conn = sqlite3.connect(sample_db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(schema.TABLES)
    for table, cols in schema.TABLES.items():
        info = conn.execute(f"SELECT name, type, \"notnull\" FROM pragma_table_info('{table}')").fetchall()
        assert info == [(c, kind, 0) for c, kind in cols]
