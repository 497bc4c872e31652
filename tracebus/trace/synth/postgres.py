"""Write the synthetic MES database into PostgreSQL (``tracebus sample-data --to postgresql://...``).

The same tables and rows as :func:`.build.generate` writes for the same scale and seed (the
one generator, :func:`.build.load`, feeds both), with the real columns' PostgreSQL types
(:data:`.schema.PG_TYPES`) and exactly the real indexes, loaded with COPY in one transaction:
the tables appear complete, with their indexes and statistics (ANALYZE), or not at all. A
database that already has a table of those names is refused unless ``replace`` is given; then
those tables (only those) are dropped in the same transaction.
"""

from __future__ import annotations

import psycopg

from tracebus.trace.synth import schema
from tracebus.trace.synth.build import DEFAULT_SEED, load


class TablesExist(Exception):
    """The target database already has tables of the sample's names (``replace`` not given)."""


def existing_tables(conn: psycopg.Connection) -> list[str]:
    """The sample's tables already in the connection's current schema, by their names."""
    rows = conn.execute("SELECT upper(table_name) FROM information_schema.tables "
                        "WHERE table_schema = current_schema() AND upper(table_name) = ANY(%s)",
                        (list(schema.TABLES),)).fetchall()
    return sorted(r[0] for r in rows)


def generate_postgres(dsn: str, scale: float = 1.0, seed: int = DEFAULT_SEED, replace: bool = False) -> dict[str, int]:
    """Load the synthetic database of ``scale`` and ``seed`` into the PostgreSQL at ``dsn``.

    Returns:
        Row counts per table (the same as :func:`.build.generate` returns).

    Raises:
        TablesExist: a table of the sample's names exists and ``replace`` is false.
        psycopg.Error: the server refused a statement or the connection failed (nothing is left).
    """
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    with psycopg.connect(dsn, connect_timeout=10, application_name="tracebus sample-data") as conn:
        found = existing_tables(conn)
        if found and not replace:
            raise TablesExist(", ".join(found))
        with conn.transaction():
            for table in found:
                conn.execute(f"DROP TABLE {table}")
            for ddl in schema.create_tables_pg():
                conn.execute(ddl)
            with conn.cursor() as cursor:
                def write(table: str, rows) -> int:
                    names = ", ".join(c for c, _ in schema.TABLES[table])
                    n = 0
                    with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                            n += 1
                    return n

                counts = load(write, scale, seed)
            for ddl in schema.INDEXES:
                conn.execute(ddl)
            for table in schema.TABLES:
                conn.execute(f"ANALYZE {table}")
    return counts
