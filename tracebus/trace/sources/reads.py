"""What a kind's reads need of a source, and the base class of a kind's reads.

A source (:class:`~.base.EventSource`: SQLite, PostgreSQL, Oracle) provides the generic
capability: a connection per process, its :class:`~.queries.Dialect`, the session control and
one statement run on a server-side cursor, batch by batch (:meth:`~.base.EventSource.execute`).
A kind's reads (its statements per dialect and how their rows come back) live in the kind's
folder (:mod:`tracebus.trace.msd.reads`, :mod:`tracebus.trace.stages.seeds`,
:mod:`tracebus.trace.stages.trees`), or here in ``sources/`` when more than one kind uses them
(:mod:`.lineage`, :mod:`.windows`); each is a :class:`Reads` over any :class:`Reader`, which
names the two things they use, so a kind depends on no source class and on no other kind's reads.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from tracebus.trace.sources.queries import Dialect

#: Rows fetched at a time by a read that keeps every row of its statement (:func:`all_rows`).
ALL_ROWS_BATCH = 10000


class Reader(Protocol):
    """What a kind's reads need of a source: its dialect, and one statement run."""

    #: The SQL dialect the statements are written in.
    dialect: Dialect

    def execute(self, sql: str, params: dict, batch_rows: int) -> Iterator[list[tuple]]:
        """Run one statement of this dialect; yield its rows in lists of at most ``batch_rows``.

        Raises:
            SourceError: while iterating, when the database fails.
        """
        ...  # pragma: no cover


def all_rows(source: Reader, sql: str, params: dict) -> list[tuple]:
    """Every row of one statement, as a list."""
    return [row for rows in source.execute(sql, params, ALL_ROWS_BATCH) for row in rows]


class Reads:
    """The base of a kind's reads: the :class:`Reader` they run on.

    Args:
        source: the source (any :class:`Reader`); the reads neither open nor close it.
    """

    def __init__(self, source: Reader):
        self.source = source

    @property
    def dialect(self) -> Dialect:
        return self.source.dialect

    def _execute(self, sql: str, params: dict, batch_rows: int) -> Iterator[list[tuple]]:
        return self.source.execute(sql, params, batch_rows)

    def _rows(self, sql: str, params: dict) -> list[tuple]:
        return all_rows(self.source, sql, params)
