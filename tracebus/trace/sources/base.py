"""The event-source interface: a dialect's connection, statements and batches, and the domains' rows.

:class:`EventSource` is the generic capability every source provides (SQLite, PostgreSQL,
Oracle): a connection opened in the process that uses it, its :class:`~.queries.Dialect`, the
session control (:mod:`.control`), and one statement run on a server-side cursor, batch by
batch (:meth:`EventSource.execute`, which is what a kind's reads use: :mod:`.reads`). A
subclass only runs a statement and yields ``fetchmany`` batches, translating driver errors to
:class:`~tracebus.trace.errors.SourceError`.

Beside it, the read of the event domains the kinds share (:meth:`EventSource.fetch`: the events
kind's units, the MSD kind's events stage): it validates the domain, strips and deduplicates the
CIDs (order kept), splits them into IN lists of at most :data:`IN_LIMIT` bind variables, builds
the statement from :mod:`.queries`, and turns the jobs domain's job rows into one row per (job,
matching CID) (:func:`expand_jobs`, :func:`order_jobs`, which the events kind's one scan of
DW_MES_JOB uses too). The reads of one kind (MSD's detection, the stages' seeds and trees, the
events kind's jobs scan) are not here: they live in the kind's folder (:mod:`.reads`).

Connections are opened on first use in the process that uses them: a source records the
pid that opened its connection and opens a new one when it finds itself in another process
(after fork), never touching the inherited one. A source object is not thread-safe; use one
per thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ContextManager, Iterable, Iterator, Sequence

from tracebus.errors import InvalidParams
from tracebus.trace.errors import SourceError
from tracebus.trace import domains
from tracebus.trace.sources.batching import IN_LIMIT, Batch, rebatch, unique_cids
from tracebus.trace.sources.control import SessionControl, Statement
from tracebus.trace.sources.queries import Dialect, select_sql

__all__ = ["IN_LIMIT", "Batch", "EventSource", "expand_jobs", "order_jobs", "rebatch", "unique_cids"]

_JOB_CIDS = domains.COLUMNS["jobs"].index("CONTAINERIDS")


def _substring_matcher(cids: Sequence[str]):
    """Return ``f(text) -> [cid, ...]``: the CIDs that are substrings of ``text``, in input order.

    Equivalent to ``[c for c in cids if c in text]`` but linear in ``text``: a CID without a
    comma lies inside one comma-separated entry, so only the entries' substrings of the CIDs'
    lengths are looked up. The rare CID with a comma is tested directly.
    """
    rank = {cid: i for i, cid in enumerate(cids)}
    lengths = sorted({len(cid) for cid in cids if "," not in cid})
    with_comma = [cid for cid in cids if "," in cid]

    def match(text: str) -> list[str]:
        found = {c for c in with_comma if c in text}
        for entry in text.split(","):
            for size in lengths:
                for i in range(len(entry) - size + 1):
                    if entry[i:i + size] in rank:
                        found.add(entry[i:i + size])
        return sorted(found, key=rank.__getitem__)

    return match


def expand_jobs(batches: Iterable[list[tuple]], cids: Sequence[str]) -> Iterator[list[tuple]]:
    """One row per (job, CID of ``cids`` that is a substring of its CONTAINERIDS), CONTAINERID set."""
    match = _substring_matcher(cids)
    for rows in batches:
        out = []
        for row in rows:
            listed = row[_JOB_CIDS]
            if listed:
                out.extend(row[:-1] + (cid,) for cid in match(listed))
        yield out


_JOB_ID, _JOB_CREATED = (domains.COLUMNS["jobs"].index(c) for c in ("JOBID", "CREATEDATE"))


def order_jobs(rows: Iterable[tuple], cids: Sequence[str]) -> list[tuple]:
    """Jobs rows of one unit in its statement's order (:func:`.queries._jobs`): CREATEDATE
    DESC with a NULL first (Oracle's DESC), JOBID, then each job's CIDs in ``cids``' order."""
    rank = {cid: i for i, cid in enumerate(cids)}
    out = sorted(rows, key=lambda r: (r[_JOB_ID], rank.get(r[-1], len(rank))))
    # A stable sort, reversed: NULL (True) before any date, later dates first, ties as above.
    out.sort(key=lambda r: (r[_JOB_CREATED] is None, r[_JOB_CREATED] or ""), reverse=True)
    return out


class EventSource(ABC):
    """A database of the DWH tables (SQLite, PostgreSQL or Oracle): statements of its dialect
    run batch by batch (:meth:`execute`, a :class:`~.reads.Reader`), and the event domains' rows."""

    #: The SQL dialect of the source.
    dialect: Dialect
    #: Set in a worker by its runtime: the session cap, the session's name and the watcher that
    #: cancels a statement on the server (:mod:`.control`). None (the API): none of them.
    control: SessionControl | None = None
    #: Server-side limit of one statement in seconds (``TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S``); 0: none.
    statement_timeout_s: int = 0

    def _statement(self) -> ContextManager[Statement]:
        """``with self._statement() as st``: around each statement a subclass runs (it binds
        ``st`` to its connection's cancel, names its session ``st.label``, and calls
        ``st.abort()`` when interrupted mid-statement)."""
        return (self.control or _NO_CONTROL).statement()

    def timeout_error(self) -> SourceError:
        """The error of a statement the server stopped at ``statement_timeout_s``: not retried."""
        return SourceError(f"statement ran past TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S "
                           f"({self.statement_timeout_s} s) and was stopped by the server", transient=False)

    def fetch(self, domain: str, cids: Sequence[str], batch_rows: int) -> Iterator[Batch]:
        """Fetch the rows of ``domain`` for ``cids``.

        Args:
            domain: one of :data:`tracebus.trace.domains.DOMAINS`.
            cids: container ids; stripped and deduplicated, order kept. Unknown ones
                simply match nothing.
            batch_rows: the largest batch to yield (the ``fetchmany`` size).

        Returns:
            An iterator of ``(columns, rows)``: ``columns`` are the domain's columns and
            ``rows`` a non-empty list of at most ``batch_rows`` tuples in that order.
            Nothing is yielded when no row matches. The statement runs lazily, as the
            iterator is consumed; closing the iterator closes the cursor.

        Raises:
            InvalidParams: at once, for an unknown domain, bad CIDs or ``batch_rows < 1``.
            SourceError: while iterating, when the database fails (``transient`` says
                whether a retry may succeed).
        """
        cols = list(domains.columns(domain))
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise InvalidParams(f"batch_rows must be a positive integer, got {batch_rows!r}")
        return self._fetch(domain, cols, unique_cids(cids), batch_rows)

    def _fetch(self, domain: str, cols: list[str], cids: list[str], batch_rows: int) -> Iterator[Batch]:
        for start in range(0, len(cids), IN_LIMIT):
            group = cids[start:start + IN_LIMIT]
            sql = select_sql(self.dialect, domain, len(group))
            params = {f"p{i}": cid for i, cid in enumerate(group)}
            batches = self._execute(sql, params, batch_rows)
            if domain == "jobs":
                batches = rebatch(expand_jobs(batches, group), batch_rows)
            for rows in batches:
                if rows:
                    yield cols, rows

    def execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        """Run one statement of this source's dialect (a kind's read: :mod:`.reads`); yield its
        rows in lists of at most ``batch_rows``, fetched from a server-side cursor as consumed.

        Raises:
            SourceError: while iterating, when the database fails.
        """
        return self._execute(sql, params, batch_rows)

    def ping(self) -> bool:
        """Reach the source's server (a connection and a trivial statement): True when it
        answered, False for an embedded source that has no server (SQLite).

        Raises:
            SourceError: the server cannot be reached.
        """
        return False

    @abstractmethod
    def _execute(self, sql: str, params: dict[str, str], batch_rows: int) -> Iterator[list[tuple]]:
        """Run one statement; yield its rows in ``fetchmany(batch_rows)`` lists."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection(s) this process opened; the source may be used again later."""


_NO_CONTROL = SessionControl(None)
