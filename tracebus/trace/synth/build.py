"""Write a synthetic MES database: plan containers, generate events, bulk-load SQLite (or PostgreSQL).

The load runs with the journal and fsync off, inserts through ``executemany`` in batches
and creates the indexes afterwards; the database is written to a temporary file next to
the target and renamed into place only when complete, so a crash never leaves a half
database behind. :func:`load` generates the rows and hands each table's to a writer, so
:mod:`.postgres` loads the very same rows with COPY.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path
from typing import Callable, Iterable

from tracebus.trace.synth import resources, schema
from tracebus.trace.synth.events import EventGenerator
from tracebus.trace.synth.lineage import Plan, plan
from tracebus.trace.synth.vocab import build_vocab

DEFAULT_SEED = 20250225
_FLUSH_ROWS = 50000


def _container_rows(p: Plan):
    for lot in p.lots:
        name, line, pj_type, function, bop = lot.product
        yield (lot.cid, lot.name, lot.split_from, lot.original, lot.first_name, lot.order,
               pj_type, bop, function, name, line, "LOT")


#: ``write(table, rows) -> rows written``: appends rows (tuples in :data:`.schema.TABLES`' order) to a table.
Writer = Callable[[str, Iterable[tuple]], int]


def sqlite_writer(conn: sqlite3.Connection) -> Writer:
    def write(table: str, rows: Iterable[tuple]) -> int:
        before = conn.total_changes
        conn.executemany(schema.insert_sql(table), rows)
        return conn.total_changes - before

    return write


def _flush(write: Writer, rows: dict[str, list[tuple]], counts: dict[str, int]) -> None:
    for table, buffer in rows.items():
        if buffer:
            write(table, buffer)
            counts[table] = counts.get(table, 0) + len(buffer)
            buffer.clear()


def load(write: Writer, scale: float, seed: int) -> dict[str, int]:
    """Generate the tables of ``scale`` and ``seed`` through ``write``; row counts per table."""
    vocab = build_vocab(seed)
    rng = random.Random(f"data:{seed}:{scale!r}")
    p = plan(rng, vocab, scale)
    counts = {table: 0 for table in schema.TABLES}
    write("DW_MES_CONTAINER", _container_rows(p))
    counts["DW_MES_CONTAINER"] = len(p.lots)
    write("DW_MES_PJ_COMBINEDASSYLOTS", ((s.cid, s.name, t.cid, t.name) for s, t in p.merges))
    counts["DW_MES_PJ_COMBINEDASSYLOTS"] = len(p.merges)
    spec_rows = vocab.spec_map()
    write("DW_MES_SPEC_WORKCENTER_V", spec_rows)
    counts["DW_MES_SPEC_WORKCENTER_V"] = len(spec_rows)
    merge_sources: dict[str, list[str]] = {}
    for source, target in p.merges:
        merge_sources.setdefault(target.cid, []).append(source.cid)
    gen = EventGenerator(rng, vocab, merge_sources, bad_batch=max(1, round(3 * scale)))
    history = gen.rows["DW_MES_LOTWIPHISTORY"]
    for lot in p.lots:
        gen.lot(lot)
        if len(history) >= _FLUSH_ROWS:
            _flush(write, gen.rows, counts)
    _flush(write, gen.rows, counts)
    machines = resources.resources(vocab)
    write("DW_MES_RESOURCE", machines)
    counts["DW_MES_RESOURCE"] = len(machines)
    counts["DW_MES_RESOURCESTATUS_SHIFT"] = write("DW_MES_RESOURCESTATUS_SHIFT",
                                                  resources.status_rows(seed, machines))
    return counts


def generate(path: str | os.PathLike, scale: float = 1.0, seed: int = DEFAULT_SEED) -> dict[str, int]:
    """Generate the synthetic database at ``path`` (replacing any file there).

    Args:
        path: the SQLite file to write.
        scale: 1.0 for about 120,000 containers and 2 million event rows; 0.01 and 0.1 for tests.
        seed: the random seed; the same seed and scale give identical table contents.

    Returns:
        Row counts per table.
    """
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    conn = None
    try:
        # Inside the try: an interrupt (``tracebus up`` turns SIGTERM into KeyboardInterrupt)
        # raised as connect returns, the file just created, must remove it too.
        conn = sqlite3.connect(tmp, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "locking_mode=EXCLUSIVE",
                       "temp_store=MEMORY", "cache_size=-262144"):
            conn.execute(f"PRAGMA {pragma}")
        for ddl in schema.create_tables_sql():
            conn.execute(ddl)
        conn.execute("BEGIN")
        counts = load(sqlite_writer(conn), scale, seed)
        conn.execute("COMMIT")
        for ddl in schema.INDEXES:
            conn.execute(ddl)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.close()
        os.replace(tmp, target)
    except BaseException:
        if conn is not None:
            conn.close()
        tmp.unlink(missing_ok=True)
        raise
    return counts
