"""``tracebus sample-data --to postgresql://...`` and ``tracebus sql --dialect postgres``, on the
suite's own PostgreSQL server (tests/postgres_server.py).

The sample written into PostgreSQL holds the very rows of the SQLite file of the same scale and
seed, table by table; a database that already has those tables is refused without
``--replace``; bad input is one line and exit 2, an unreachable server one line and exit 1.
"""

from __future__ import annotations

import json
import sqlite3

import psycopg
import pytest

from tests.clitools import run_cli
from tests.redis_server import free_port
from tracebus.trace.sources.plans import postgres_plan
from tracebus.trace.sources.postgres import NumberLoader
from tracebus.trace.sources.queries import POSTGRES
from tracebus.trace.statements import every_statement
from tracebus.trace.synth import schema


def _table(conn, table: str, cols: list[str]) -> list[tuple]:
    rows = conn.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
    return sorted(rows, key=repr)


def test_sample_data_to_postgres_writes_the_same_rows_as_the_file_and_refuses_to_overwrite(
        postgres_server, sample_db):
    dsn = postgres_server.database("cli_sample", fresh=True)
    # When the CLI writes the scale-0.01 sample into an empty database
    res = run_cli("sample-data", "--scale", "0.01", "--to", dsn, env={})
    assert res.code == 0, res.err
    assert res.out.startswith(f"wrote postgresql://127.0.0.1:{postgres_server.port}/cli_sample: 1191 containers")
    assert postgres_server.password not in res.out + res.err
    # Then every table holds exactly the file's rows (dates as the file's ISO text)
    lite = sqlite3.connect(sample_db)
    with psycopg.connect(dsn) as conn:
        conn.adapters.register_loader("numeric", NumberLoader)
        for table, columns in schema.TABLES.items():
            cols = [c for c, _ in columns]
            shown = [f"TO_CHAR({c}, 'YYYY-MM-DD HH24:MI:SS')" if schema.PG_TYPES[table][c].startswith("timestamp")
                     else c for c in cols]
            got = _table(conn, table, shown)
            want = _table(lite, table, cols)
            assert len(got) == len(want) and got == want, table
        before = conn.execute("SELECT COUNT(*) FROM DW_MES_LOTWIPHISTORY").fetchone()[0]
        conn.execute("DELETE FROM DW_MES_LOTWIPHISTORY WHERE CONTAINERID IN "
                     "(SELECT CONTAINERID FROM DW_MES_LOTWIPHISTORY LIMIT 5)")
        conn.commit()
    # And a second write is refused, one line, the tables untouched
    again = run_cli("sample-data", "--scale", "0.01", "--to", dsn, env={})
    assert again.code == 2 and again.out == ""
    assert again.err.count("\n") == 1 and "--replace" in again.err and "DW_MES_CONTAINER" in again.err
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT COUNT(*) FROM DW_MES_LOTWIPHISTORY").fetchone()[0] < before
    # And with --replace the tables are written again
    replaced = run_cli("sample-data", "--scale", "0.01", "--to", dsn, "--replace", env={})
    assert replaced.code == 0, replaced.err
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT COUNT(*) FROM DW_MES_LOTWIPHISTORY").fetchone()[0] == before


@pytest.mark.parametrize("argv, said", [
    (["--to", "mysql://u:p@127.0.0.1/db"], "--to takes a PostgreSQL URL"),
    (["--to", "postgresql://127.0.0.1/db", "--out", "x.db"], "exclusive"),
    (["--replace"], "--replace goes with --to"),
])
def test_sample_data_to_bad_input_is_one_line_exit_2(argv, said, tmp_path):
    res = run_cli("sample-data", "--scale", "0.01", *argv, env={})
    assert res.code == 2 and res.out == "" and res.err.count("\n") == 1 and said in res.err, res.err
    assert "u:p@" not in res.err


def test_sample_data_to_an_unreachable_server_is_one_line_exit_1_without_the_password():
    res = run_cli("sample-data", "--scale", "0.01", "--to",
                  f"postgresql://tracebus:s3cret-pw@127.0.0.1:{free_port()}/db", env={})
    assert res.code == 1 and res.out == "" and res.err.count("\n") == 1, res.err
    assert res.err.startswith("tracebus: postgres: ") and "s3cret-pw" not in res.err


def test_sql_lists_the_postgres_dialect_and_explains_it_on_the_server(postgres_sample):
    res = run_cli("sql", "--dialect", "postgres", "--json", env={})
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert [e["name"] for e in doc] == [s.name for s in every_statement(POSTGRES)]
    assert not any("DWH." in e["sql"] or "INSTR(" in e["sql"] or "json_each" in e["sql"] for e in doc)
    assert any("TO_CHAR(" in e["sql"] for e in doc)
    # --explain runs EXPLAIN for every statement on the configured server
    explained = run_cli("sql", "--dialect", "postgres", "--explain", "--json",
                        env={"TRACEBUS_POSTGRES_DSN": postgres_sample})
    assert explained.code == 0, explained.err
    plans = {e["name"]: e for e in json.loads(explained.out)}
    assert set(plans) == {s.name for s in every_statement(POSTGRES)}
    assert plans["msd.filter_tuples"]["full_scans"] == ["DW_MES_CONTAINER"]  # no WHERE an index serves
    assert all(e["plan"] for e in plans.values())
    text = run_cli("sql", "--dialect", "postgres", "--explain", env={"TRACEBUS_POSTGRES_DSN": postgres_sample}).out
    assert "-- msd.filter_tuples: FULL SCAN of DW_MES_CONTAINER" in text and "Seq Scan on dw_mes_container" in text
    # Without a DSN: one line, exit 2
    missing = run_cli("sql", "--dialect", "postgres", "--explain", env={})
    assert missing.code == 2 and missing.err.count("\n") == 1 and "TRACEBUS_POSTGRES_DSN" in missing.err


def test_postgres_plans_name_index_reads_and_sequential_scans(postgres_sample):
    with psycopg.connect(postgres_sample) as conn:
        conn.execute("SET enable_seqscan = off")  # the sample is small: make the index read visible
        plan = postgres_plan(conn, "SELECT c.CONTAINERNAME FROM DW_MES_CONTAINER c WHERE c.CONTAINERID = :p0",
                             {"p0": "x"})
        assert plan.full_scans == [] and ("DW_MES_CONTAINER", "DW_C_CONTAINERID") in plan.index_reads
        scan = postgres_plan(conn, "SELECT COUNT(*) FROM DW_MES_JOB WHERE CONTAINERIDS LIKE '%,%'", {})
        assert scan.full_scans == ["DW_MES_JOB"]


def test_sample_data_cids_reads_the_same_trace_set_from_postgres(postgres_sample, sample_db):
    from_file = run_cli("sample-data", "cids", "--db", str(sample_db), env={})
    from_pg = run_cli("sample-data", "cids", "--db", postgres_sample, env={})
    assert from_pg.code == 0, from_pg.err
    assert from_pg.out == from_file.out and len(from_pg.out.split()) > 100
    none = run_cli("sample-data", "cids", "--db", postgres_sample, "--station", "NOSUCHSTATION", env={})
    assert none.code == 2 and none.err.count("\n") == 1 and postgres_server_password(postgres_sample) not in none.err


def postgres_server_password(dsn: str) -> str:
    return psycopg.conninfo.conninfo_to_dict(dsn)["password"]
