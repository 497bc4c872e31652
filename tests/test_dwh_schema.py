"""The embedded database and every statement against the real DWH schema (``tests/data/dwh_schema.json``).

The schema file is the dashboard repository's ``data/table_schema_info.json`` without its
sample rows: every table the dashboard reads, with columns, types, indexes and row counts.
The embedded database (the file ``tracebus sample-data`` writes) must have no table,
column or index that the DWH lacks, the real types mapped to SQLite affinities, and every
real index whose columns it carries. Every statement the sources can send (the catalog that
``tracebus sql`` prints) is parsed with sqlglot and qualified against the schema its dialect
reads: an unknown table or column fails. The PostgreSQL sample (``tracebus sample-data --to``)
is held to the same: the real types mapped to PostgreSQL's, exactly the real indexes.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tracebus.trace import domains, query
from tracebus.trace.events import jobs_domain
from tracebus.trace.msd import sql as msd_sql
from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.query import answers
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.postgres import PostgresSource
from tracebus.trace.sources.queries import ORACLE, POSTGRES, SQLITE, TABLES
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.stages import sql as stages_sql
from tracebus.trace.stages.seeds import SeedReads
from tracebus.trace.stages.trees import TreeReads
from tracebus.trace.statements import every_statement
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


def pg_type(column: dict) -> str:
    """The PostgreSQL type of a real column (schema.py's PG_TYPES mapping)."""
    kind = column["data_type"]
    if kind in ("CHAR", "VARCHAR2"):
        return f"character varying({column['data_length']})"
    if kind == "DATE":
        return "timestamp(0) without time zone"
    assert kind == "NUMBER", kind
    precision = column["data_precision"]
    return "numeric" if precision is None else f"numeric({precision},{column['data_scale']})"


def test_the_postgres_sample_has_the_real_types_and_exactly_the_real_indexes(postgres_sample):
    import psycopg

    with psycopg.connect(postgres_sample) as conn:
        for table, cols in schema.TABLES.items():
            real = {c["column_name"]: c for c in DWH[table]["columns"]}
            found = conn.execute(
                "SELECT upper(a.attname), format_type(a.atttypid, a.atttypmod), a.attnotnull, "
                "(SELECT collname FROM pg_collation WHERE oid = a.attcollation) FROM pg_attribute a "
                "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                (table.lower(),)).fetchall()
            assert [(c, t, n) for c, t, n, _ in found] == [(c, pg_type(real[c]), False) for c, _ in cols], table
            assert {coll for _, t, _, coll in found if t.startswith("character")} == {"C"}
        indexes = set()
        for name, table, unique, cols in conn.execute(
                "SELECT upper(i.relname), upper(t.relname), x.indisunique, "
                "array(SELECT upper(a.attname) FROM unnest(x.indkey) WITH ORDINALITY k(n, o) "
                "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n ORDER BY k.o) "
                "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
                "JOIN pg_namespace s ON s.oid = t.relnamespace WHERE s.nspname = current_schema()"):
            indexes.add((name, table, "UNIQUE" if unique else "NONUNIQUE", tuple(cols)))
        assert indexes == _expected_indexes()
        tables = {r[0] for r in conn.execute("SELECT upper(table_name) FROM information_schema.tables "
                                             "WHERE table_schema = current_schema()")}
        assert tables == set(schema.TABLES)


# --- every statement, qualified against the schema its dialect reads -----------------------

def _oracle_schema() -> dict:
    out: dict[str, dict] = {}
    for table, info in DWH.items():
        out.setdefault(info["owner"], {})[table] = {c["column_name"]: c["data_type"] for c in info["columns"]}
    return out


def _sqlite_schema() -> dict:
    return {table: {c: kind for c, kind in cols} for table, cols in schema.TABLES.items()}


def unknown_names(sql: str, dialect: str) -> list[str]:
    """The tables and columns of ``sql`` that the dialect's schema lacks (sqlglot's qualify).

    Oracle statements are held to the real DWH (each table named with its owner, ``DWH.``),
    SQLite ones to the embedded DDL (bare names). Every column reference must resolve to a
    column of a table or a derived table in scope.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import OptimizeError
    from sqlglot.optimizer.qualify import qualify

    known = _oracle_schema() if dialect == "oracle" else _sqlite_schema()
    if dialect == "postgres":
        known = {t: {c: kind for c, kind in cols.items()} for t, cols in schema.PG_TYPES.items()}
    tree = sqlglot.parse_one(sql, read=dialect)
    ctes = {cte.alias_or_name.upper() for cte in tree.find_all(exp.CTE)}
    missing = []
    for table in tree.find_all(exp.Table):
        name, owner = table.name.upper(), table.db.upper()
        if (not owner and name in ctes) or (dialect == "sqlite" and isinstance(table.this, exp.Func)):
            continue  # a CTE, or SQLite's json_each(:ids) (a bound list)
        real = known.get(owner, {}).get(name) if dialect == "oracle" else (None if owner else known.get(name))
        if real is None:
            missing.append(f"table {owner + '.' if owner else ''}{name}")
    if missing:
        return missing
    try:
        qualify(tree, schema=known, dialect=dialect, validate_qualify_columns=True, quote_identifiers=False)
    except OptimizeError as e:
        return [str(e)]
    return []


@pytest.mark.parametrize("dialect", [ORACLE, SQLITE, POSTGRES], ids=lambda d: d.name)
def test_every_statement_qualifies_against_the_schema_with_no_unknown_name(dialect):
    found = {s.name: unknown_names(s.sql, dialect.name) for s in every_statement(dialect)}
    assert len(found) >= 30
    assert {name: bad for name, bad in found.items() if bad} == {}


def test_the_check_finds_an_unknown_table_column_or_owner():
    assert unknown_names("SELECT m.MATERIALDESCRIPTION FROM DWH.DW_MES_LOTMATERIALSHISTORY m", "oracle")
    assert unknown_names("SELECT MATERIALDESCRIPTION FROM DWH.DW_MES_LOTMATERIALSHISTORY", "oracle")
    assert unknown_names("SELECT x.A FROM DWH.NO_SUCH x", "oracle") == ["table DWH.NO_SUCH"]
    assert unknown_names("SELECT CONTAINERID FROM DW_MES_CONTAINER", "oracle")  # no owner: no such table
    assert unknown_names("SELECT t.CONTAINERID FROM (SELECT CONTAINERID, BOGUS FROM DWH.DW_MES_CONTAINER) t",
                         "oracle")
    assert unknown_names("SELECT c.CONTAINERID FROM DW_MES_CONTAINER c WHERE c.PRODUCTBOMBASEID = :p0", "sqlite")
    assert unknown_names("SELECT CONTAINERID FROM DWH.DW_MES_CONTAINER", "sqlite")
    assert unknown_names("SELECT c.CONTAINERID FROM DWH.DW_MES_CONTAINER c WHERE c.PRODUCTBOMBASEID = :p0",
                         "oracle") == []


class Recording(SqliteSource):
    """The embedded source, recording the text of every statement it runs."""

    def __init__(self, path):
        super().__init__(path)
        self.sent: list[str] = []

    def _execute(self, sql, params, batch_rows):
        self.sent.append(sql)
        return super()._execute(sql, params, batch_rows)


class RecordingPostgres(PostgresSource):
    """The PostgreSQL source, recording the text of every statement it runs."""

    def __init__(self, dsn):
        super().__init__(dsn)
        self.sent: list[str] = []

    def _execute(self, sql, params, batch_rows):
        self.sent.append(sql)
        return super()._execute(sql, params, batch_rows)


def _shape(sql: str) -> str:
    """The statement with each IN list of binds collapsed, so lists of any length compare equal."""
    return re.sub(r":p\d+(?:, :p\d+)*", ":p*", sql)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_catalog_lists_every_statement_a_source_sends(sample_db, dialect, request):
    conn = sqlite3.connect(sample_db)
    cids = [r[0] for r in conn.execute(
        "SELECT DISTINCT h.CONTAINERID FROM DW_MES_LOTWIPHISTORY h JOIN DW_MES_PJ_COMBINEDASSYLOTS p "
        "ON p.LOTID = h.CONTAINERID WHERE h.WORKCENTERNAME LIKE '%TMTT%' ORDER BY 1 LIMIT 3")]
    names = [r[0] for r in conn.execute(f"SELECT CONTAINERNAME FROM DW_MES_CONTAINER WHERE CONTAINERID IN "
                                        f"({', '.join('?' * len(cids))})", cids)]
    day = conn.execute("SELECT substr(MAX(TRACKINTIMESTAMP), 1, 10) FROM DW_MES_LOTWIPHISTORY").fetchone()[0]
    src = (Recording(sample_db) if dialect == "sqlite"
           else RecordingPostgres(request.getfixturevalue("postgres_sample")))  # the same sample
    for domain in domains.DOMAINS:
        list(src.fetch(domain, cids, 100))
    list(jobs_domain.scan_jobs(src, cids, 100))
    for domain in msd_sql.BACKWARD_COLUMNS:
        list(MsdReads(src).backward_rows(domain, cids, 100))
    list(MsdReads(src).detect_by_dates(None, day, day))
    SeedReads(src).seeds_by_dates(None, day, day)
    list(MsdReads(src).detect_by_cids(None, cids))
    list(MsdReads(src).detect_by_cids(None, cids, start_date=day, end_date=day))
    for resolve_type in stages_sql.SEED_COLUMNS:
        SeedReads(src).resolve_seeds(resolve_type, names)
    SeedReads(src).resolve_serials(names + ["GA25*"])
    MsdReads(src).loss_reasons()
    MsdReads(src).container_filter_tuples()
    LineageReads(src).lineage_backward(cids)
    LineageReads(src).lineage_forward(cids)
    TreeReads(src).forward_tree(cids)
    TreeReads(src).reverse_tree(cids)
    for kind in query.declared().values():
        for selector, st in kind.statements.items():
            for narrow in ({}, {st.narrow: ["A", "B"]} if st.narrow else {}):  # and narrowed by its list
                params = kind.check({"start_date": day, "end_date": day, kind.selector: selector,
                                     "equipment_ids": ["EQ-1"], "equipment_names": ["EQ-1"], **narrow})
                for item in kind.units(params):
                    list(answers.unit_rows(src, kind, params, item, 100))
    src.close()
    listed = {_shape(s.sql) for s in every_statement(SQLITE if dialect == "sqlite" else POSTGRES)}
    sent = {_shape(sql) for sql in src.sent}
    assert sent - listed == set(), "a statement the catalog does not list"
    assert sent == listed, "a catalog entry that no source sends"
