"""A declared query kind's rows and answers: a unit's rows, the answer made now, a job's answer streamed.

A unit reads its statement's rows from the source (:func:`unit_rows`) and sorts them in the
worker (:func:`sort_unit`). A request answered now builds its answer whole (:func:`run_sync`,
:func:`answer`), as the original does. The result of a job is its rows in the statement's order,
written as a stream (:func:`answer_stream`): the API merges the units' sorted rows, read a slice
of a chunk at a time, so it never holds the result: a reader that stops reading holds what a
chunk's decoder keeps per unit with rows (about 100 KB: zlib's window, a slice, a row), so up
to ``TRACE_QUERY_MAX_UNITS`` of them. A statement whose ``post`` needs more than one row at a
time declares ``stream_post``, the same work over the merged rows in order with bounded memory.
Rows are ordered as Oracle orders them (NULLs last ascending, first descending:
:func:`order_rows`, :func:`order_key`).
"""

from __future__ import annotations

import functools
import heapq
from typing import Iterable, Iterator, Sequence

import orjson

from tracebus.trace.query import QueryKind, Statement
from tracebus.trace.sources import IN_LIMIT


def unit_rows(source, kind: QueryKind, params: dict, item: Sequence, batch_rows: int) -> Iterator[list]:
    """The rows of one unit ``[w0, w1, ID list index]``, in fetchmany batches."""
    w0, w1, index = item
    _, st = kind.statement(params)
    ids = [] if not st.ids else params[st.ids] if index < 0 else params[st.ids][index * IN_LIMIT:(index + 1) * IN_LIMIT]
    narrowing = st.narrowing(params)
    binds = {"w0": w0, "w1": w1, **{f"p{i}": v for i, v in enumerate(ids)},
             **{f"n{i}": v for i, v in enumerate(narrowing)}}
    for rows in source.execute(st.text(source.dialect, len(ids), len(narrowing)), binds, batch_rows):
        if rows:
            yield [[_cell(v) for v in r] for r in rows]


def _cell(value):
    # SQLite keeps a BLOB in a TEXT column as it was written; no answer or export has bytes.
    return value.decode("utf-8", "replace") if type(value) is bytes else value


def run_sync(source, kind: QueryKind, params: dict, batch_rows: int) -> dict:
    """The answer of a request answered now: every unit run here, in order, then :func:`answer`."""
    _, st = kind.statement(params)
    chunks = ((st.names, rows) for item in kind.units(params)
              for rows in unit_rows(source, kind, params, item, batch_rows))
    return answer(kind, params, chunks)


def answer(kind: QueryKind, params: dict, chunks: Iterable[tuple[list, list]]) -> dict:
    """``{"data": rows in the statement's order, "total", "date_range": {start, end}, **extra}``:
    the original's answer (its ``_df_to_records``: objects by column, NULL as null)."""
    _, st = kind.statement(params)
    rows = order_rows([dict(zip(columns, r)) for columns, part in chunks for r in part], st.order)
    total, extra = len(rows), {}
    if st.post is not None:
        rows, extra = st.post(rows, params)
        total = extra.pop("total", len(rows))
    return {"data": rows, "total": total, "date_range": {"start": params[kind.start], "end": params[kind.end]},
            **extra, **kind.extra(params)}


def sort_unit(st: Statement, rows: list[list]) -> list[list]:
    """A unit's rows (lists in the statement's column order) sorted in place by its
    :attr:`~tracebus.trace.query.Statement.merge_order`, stably, as :func:`order_rows` sorts."""
    if st.merge_order:
        rows.sort(key=order_key(st.names, st.merge_order))
    return rows


def order_key(columns: Sequence[str], order: Sequence[tuple[str, bool]]):
    """A sort key of rows (lists under ``columns``) for ``order``, NULLs as :func:`order_rows`
    places them (last ascending, first descending); ties compare equal (the sort keeps them)."""
    at = [(list(columns).index(c), descending) for c, descending in order]

    def compare(a, b) -> int:
        for i, descending in at:
            x, y = a[i], b[i]
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return (1 if x is None else -1) * (-1 if descending else 1)
            if x == y:
                continue
            return (1 if x < y else -1) if descending else (-1 if x < y else 1)
        return 0

    return functools.cmp_to_key(compare)


#: Rows per slice of a streamed answer.
SLICE_ROWS = 64


def answer_stream(kind: QueryKind, params: dict, units: list[Iterator[list]]) -> Iterator[bytes]:
    """The job's answer, the document :func:`answer` builds, as JSON slices: every unit's sorted
    rows (:func:`sort_unit`) merged in order as they are read, through ``stream_post`` when the
    statement has a ``post``; ``data`` first, then ``total`` and the other fields."""
    _, st = kind.statement(params)
    names = st.names
    merged = heapq.merge(*units, key=order_key(names, st.merge_order)) if len(units) > 1 else \
        (units[0] if units else iter(()))
    rows = (dict(zip(names, r)) for r in merged)
    extra_of = None
    if st.stream_post is not None:
        rows, extra_of = st.stream_post(rows, params)
    yield b'{"data":['
    count, batch = 0, []
    for row in rows:
        batch.append(orjson.dumps(row))
        if len(batch) == SLICE_ROWS:
            yield (b"," if count else b"") + b",".join(batch)
            count, batch = count + len(batch), []
    if batch:
        yield (b"," if count else b"") + b",".join(batch)
        count += len(batch)
    extra = extra_of() if extra_of is not None else {}
    total = extra.pop("total", count)
    tail = {"total": total, "date_range": {"start": params[kind.start], "end": params[kind.end]},
            **extra, **kind.extra(params)}
    yield b"]," + orjson.dumps(tail)[1:]


def order_rows(rows: list[dict], order: Sequence[tuple[str, bool]]) -> list[dict]:
    """``rows`` sorted by ``order`` ((column, descending), ...), stably, NULLs as Oracle sorts them
    (last ascending, first descending)."""
    for column, descending in reversed(order):
        present = [r for r in rows if r.get(column) is not None]
        nulls = [r for r in rows if r.get(column) is None]
        present.sort(key=lambda r: r[column], reverse=descending)
        rows = nulls + present if descending else present + nulls
    return rows
