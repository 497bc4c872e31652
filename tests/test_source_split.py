"""A kind names only the reads it uses: the sources are the generic capability, the reads the kinds'.

The source interface used to be the union of every kind's reads (``EventSource(MsdReads,
LineageReads, TreeReads)``): a source carried MSD's detection, the stages' seeds and trees.
Now a source is a connection, its dialect and one statement run; each kind's reads are written
over the two things they need of it (:class:`~tracebus.trace.sources.reads.Reader`) and live in
the kind's folder (or in ``sources/`` when two kinds share them). So they run on any reader at
all: here a bare sqlite3 connection that is no source, against the SQLite source, on the sample.
"""

from __future__ import annotations

import inspect
import sqlite3

import pytest

from tracebus.trace.msd.reads import MsdReads
from tracebus.trace.sources.base import EventSource
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.queries import SQLITE
from tracebus.trace.sources.reads import Reads
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.stages.seeds import SeedReads
from tracebus.trace.stages.trees import TreeReads

KINDS_READS = (MsdReads, SeedReads, TreeReads)


class BareReader:
    """The two things a kind's reads need, from plain sqlite3: no pool, no control, no retry.
    Each statement on a connection of its own (step A runs three at once, from threads)."""

    dialect = SQLITE

    def __init__(self, path):
        self.path, self.statements = f"file:{path}?mode=ro", 0

    def execute(self, sql, params, batch_rows):
        self.statements += 1
        conn = sqlite3.connect(self.path, uri=True)
        try:
            cursor = conn.execute(sql, params)
            while rows := cursor.fetchmany(batch_rows):
                yield rows
        finally:
            conn.close()


def _public(cls) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def test_a_source_carries_no_kinds_reads():
    on_source = {name for name in [*dir(EventSource), *EventSource.__annotations__] if not name.startswith("_")}
    for reads in KINDS_READS + (LineageReads,):
        assert issubclass(reads, Reads) and not issubclass(EventSource, reads)
        assert not (_public(reads) & on_source), f"{reads.__name__}'s reads are on the source too"
    assert "scan_jobs" not in on_source  # the events kind's one read of DW_MES_JOB is its own
    assert {"execute", "dialect", "fetch", "close"} <= on_source


@pytest.fixture
def readers(sample_db):
    source = SqliteSource(sample_db)
    yield BareReader(sample_db), source
    source.close()


def test_each_kinds_reads_run_on_any_reader_with_the_sources_answers(readers):
    bare, source = readers
    cids = [r[0] for rows in bare.execute("SELECT DISTINCT CONTAINERID FROM DW_MES_LOTWIPHISTORY "
                                          "ORDER BY CONTAINERID LIMIT 300", {}, 100) for r in rows]

    def both(read):
        return read(bare), read(source)

    def rows(batches):
        return [row for _, batch in batches for row in batch]

    got, want = both(lambda r: rows(MsdReads(r).detect_by_cids("測試", cids)))
    assert got == want and want
    got, want = both(lambda r: MsdReads(r).loss_reasons())
    assert got == want and want
    got, want = both(lambda r: SeedReads(r).seeds_by_dates("測試", "2025-01-01", "2025-02-28"))
    assert got == want and want
    got, want = both(lambda r: LineageReads(r).lineage_backward(cids[:50]).to_dict())
    assert got == want and want["total_ancestor_count"] > 0
    got, want = both(lambda r: TreeReads(r).forward_tree(cids[:20]))
    assert got == want and want["nodes"]
    assert bare.statements > 10
