"""``tracebus sql [--dialect oracle|sqlite] [--json] [--explain]``: every statement in the open."""

from __future__ import annotations

import json

from tests.clitools import run_cli
from tracebus.trace.statements import every_statement
from tracebus.trace.sources.plans import oracle_plan_from_rows
from tracebus.trace.sources.queries import ORACLE, SQLITE


def test_json_lists_every_statement_of_each_dialect_as_name_sql_binds():
    for dialect, d in (("oracle", ORACLE), ("sqlite", SQLITE)):
        res = run_cli("sql", "--dialect", dialect, "--json", env={})
        assert res.code == 0, res.err
        doc = json.loads(res.out)
        assert [e["name"] for e in doc] == [s.name for s in every_statement(d)]
        assert all(set(e) == {"name", "sql", "binds"} for e in doc)
        for entry in doc:  # each bind is a placeholder of the statement (SQLite's jobs match in Python)
            if not (dialect == "sqlite" and entry["name"] == "events.jobs"):
                assert all(f":{bind}" in entry["sql"] for bind in entry["binds"]), entry["name"]
        assert all(("DWH.DW_MES_" in e["sql"]) == (dialect == "oracle") for e in doc)
    default = json.loads(run_cli("sql", "--json", env={}).out)
    assert default == json.loads(run_cli("sql", "--dialect", "oracle", "--json", env={}).out)


def test_text_names_each_statement_with_its_builder_and_binds():
    res = run_cli("sql", env={})
    assert res.code == 0
    for s in every_statement(ORACLE):
        assert f"-- {s.name}  ({s.origin})" in res.out and s.origin.startswith("tracebus/trace/")
    assert "m.DESCRIPTION AS MATERIALDESCRIPTION" in res.out


def test_explain_on_oracle_needs_a_dsn_one_line_exit_2():
    res = run_cli("sql", "--explain", env={})
    assert res.code == 2 and res.out == ""
    assert res.err.count("\n") == 1 and "TRACEBUS_ORACLE_DSN" in res.err


def test_explain_on_the_embedded_database_flags_its_full_scans(sample_db, tmp_path):
    res = run_cli("sql", "--explain", "--dialect", "sqlite", "--json", env={"TRACEBUS_SQLITE_PATH": str(sample_db)})
    assert res.code == 0, res.err
    plans = {e["name"]: e for e in json.loads(res.out)}
    assert set(plans) == {s.name for s in every_statement(SQLITE)}
    assert plans["lineage.snapshot"]["full_scans"] == []
    assert any("DW_C_CONTAINERID" in line for line in plans["lineage.snapshot"]["plan"])
    assert plans["msd.filter_tuples"]["full_scans"] == ["DW_MES_CONTAINER"]  # as the original's cache refresh
    text = run_cli("sql", "--explain", "--dialect", "sqlite", env={"TRACEBUS_SQLITE_PATH": str(sample_db)}).out
    assert "-- msd.filter_tuples: FULL SCAN of DW_MES_CONTAINER" in text
    missing = run_cli("sql", "--explain", "--dialect", "sqlite", env={"TRACEBUS_SQLITE_PATH": str(tmp_path / "no.db")})
    assert missing.code == 2 and "no sample database" in missing.err


def test_oracle_plan_rows_flag_table_access_full():
    plan = oracle_plan_from_rows(["line"], [("SELECT STATEMENT", None, None),
                                            ("TABLE ACCESS", "FULL", "DW_MES_JOB"),
                                            ("TABLE ACCESS", "BY INDEX ROWID BATCHED", "DW_MES_CONTAINER"),
                                            ("INDEX", "UNIQUE SCAN", "DW_C_CONTAINERID")])
    assert plan.full_scans == ["DW_MES_JOB"] and plan.lines == ["line"]
