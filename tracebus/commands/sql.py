"""``tracebus sql``: print every statement the sources can send, or their access paths.

``tracebus sql [--dialect oracle|sqlite|postgres] [--json]`` prints one statement per kind (the
catalog of :mod:`tracebus.trace.sources.catalog`), with example binds and the function that
builds it, so a DBA can review them before granting access; ``--json`` prints a list of
``{name, sql, binds}``. ``--explain`` runs ``EXPLAIN PLAN`` for each on the Oracle of
``TRACEBUS_ORACLE_DSN`` (``EXPLAIN QUERY PLAN`` on the embedded database with ``--dialect
sqlite``, ``EXPLAIN`` on the PostgreSQL of ``TRACEBUS_POSTGRES_DSN`` with ``--dialect postgres``)
and prints the plan, its full scans (PostgreSQL's sequential scans) flagged.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from tracebus.errors import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("sql", help="print every statement the sources can send (for review), or their plans",
                       description=__doc__.splitlines()[0])
    p.add_argument("--dialect", choices=("oracle", "sqlite", "postgres"), default="oracle",
                   help="the statements of this source (default: oracle)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, sql, binds}")
    p.add_argument("--explain", action="store_true",
                   help="print each statement's plan, full scans flagged: EXPLAIN PLAN on the Oracle of "
                        "TRACEBUS_ORACLE_DSN, EXPLAIN QUERY PLAN on TRACEBUS_SQLITE_PATH with --dialect sqlite, "
                        "EXPLAIN on TRACEBUS_POSTGRES_DSN with --dialect postgres")
    p.set_defaults(func=run, find_redis_url=False)


def run(args, settings) -> int:
    from tracebus.trace.statements import every_statement
    from tracebus.trace.sources.queries import DIALECTS

    listed = every_statement(DIALECTS[args.dialect])
    out = sys.stdout
    if not args.explain:
        if args.json:
            json.dump([s.to_dict() for s in listed], out, ensure_ascii=False, indent=1)
            out.write("\n")
            return 0
        for s in listed:
            out.write(f"-- {s.name}  ({s.origin})\n-- binds: {json.dumps(s.binds, ensure_ascii=False)}\n{s.sql};\n\n")
        return 0
    plans = {"oracle": _oracle_plans, "sqlite": _sqlite_plans, "postgres": _postgres_plans}[args.dialect](
        settings, listed)
    doc = []
    for s, plan in zip(listed, plans):
        doc.append({"name": s.name, "sql": s.sql, "binds": s.binds, "plan": plan.lines,
                    "full_scans": plan.full_scans})
        if not args.json:
            flag = f"FULL SCAN of {', '.join(plan.full_scans)}" if plan.full_scans else "no full scan"
            out.write(f"-- {s.name}: {flag}\n" + "".join(f"   {line}\n" for line in plan.lines) + "\n")
    if args.json:
        json.dump(doc, out, ensure_ascii=False, indent=1)
        out.write("\n")
    return 0


def _sqlite_plans(settings, listed):
    from tracebus.trace.sources.plans import sqlite_plan

    db = Path(settings.sqlite_path)
    if not db.is_file():
        raise ConfigError(f"no sample database at {db} (TRACEBUS_SQLITE_PATH): generate it with "
                          "'tracebus sample-data'")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [sqlite_plan(conn, s.sql, s.binds) for s in listed]
    except sqlite3.DatabaseError as e:
        raise ConfigError(f"{db} is not a tracebus sample database: {e}") from None
    finally:
        conn.close()


def _oracle_plans(settings, listed):
    import oracledb

    from tracebus.trace.errors import SourceError
    from tracebus.trace.sources.plans import oracle_plan

    if not settings.oracle_dsn:
        raise ConfigError("tracebus sql --explain needs TRACEBUS_ORACLE_DSN (or --dialect sqlite for the "
                          "embedded database)")
    try:
        with oracledb.connect(user=settings.oracle_user, password=settings.oracle_password,
                              dsn=settings.oracle_dsn) as conn:
            conn.call_timeout = settings.oracle_call_timeout_ms
            with conn.cursor() as cursor:
                return [oracle_plan(cursor, s.sql, s.binds, f"tracebus{i}") for i, s in enumerate(listed)]
    except oracledb.Error as e:
        raise SourceError(f"oracle: {e}") from None


def _postgres_plans(settings, listed):
    import psycopg

    from tracebus.trace.errors import SourceError
    from tracebus.trace.sources.plans import postgres_plan
    from tracebus.trace.sources.postgres import translate

    if not settings.postgres_dsn:
        raise ConfigError("tracebus sql --explain --dialect postgres needs TRACEBUS_POSTGRES_DSN")
    try:
        with psycopg.connect(settings.postgres_dsn, connect_timeout=10, application_name="tracebus sql") as conn:
            conn.read_only = True
            return [postgres_plan(conn, s.sql, s.binds) for s in listed]
    except psycopg.Error as e:
        raise SourceError(translate(e, settings.postgres_dsn).message) from None
