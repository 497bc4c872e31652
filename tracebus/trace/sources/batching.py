"""CID lists and row batches: normalizing CIDs, splitting them into IN lists, regrouping rows.

Shared by every read of a source (:mod:`.base`, :mod:`.lineage`, the kinds' reads: :mod:`.reads`).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from tracebus.errors import InvalidParams

#: Oracle allows at most 1000 expressions in an IN list.
IN_LIMIT = 1000

Batch = tuple[list[str], list[tuple]]


def unique_cids(cids: Iterable[str]) -> list[str]:
    """Strip CIDs, drop empty ones and duplicates, keep the first-seen order.

    Raises:
        InvalidParams: ``cids`` is a string or holds a non-string.
    """
    if isinstance(cids, (str, bytes)):
        raise InvalidParams("container ids must be a list of strings, not one string")
    out: dict[str, None] = {}
    for cid in cids:
        if not isinstance(cid, str):
            raise InvalidParams(f"container id must be a string, got {type(cid).__name__}")
        cid = cid.strip()
        if cid:
            out[cid] = None
    return list(out)


def unique_texts(values) -> list[str]:
    """A user's values (one string or a list) as texts: stripped, empty ones and duplicates
    dropped, first-seen order kept; None is no value."""
    if isinstance(values, str):
        values = [values]
    return list(dict.fromkeys(str(v).strip() for v in (values or []) if str(v).strip()))


def rebatch(batches: Iterable[list[tuple]], size: int) -> Iterator[list[tuple]]:
    """Regroup row lists into lists of exactly ``size`` rows (the last may be shorter)."""
    pending: list[tuple] = []
    for rows in batches:
        pending.extend(rows)
        while len(pending) >= size:
            yield pending[:size]
            del pending[:size]
    if pending:
        yield pending


def in_lists(values: list[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """Split ``values`` into IN lists of at most :data:`IN_LIMIT`: ``(group, {p0: .., p1: ..})``."""
    for start in range(0, len(values), IN_LIMIT):
        group = values[start:start + IN_LIMIT]
        yield group, {f"p{i}": v for i, v in enumerate(group)}


def walk_groups(dialect, values: list[str]) -> list[list[str]]:
    """The bind groups of a walk read once per request: in SQLite one empty group (the
    statement reads every edge and the caller walks them), in Oracle ``dialect.max_binds``
    starting values per statement (its CONNECT BY walks from them)."""
    if dialect.name == "sqlite":
        return [[]]
    size = dialect.max_binds
    return [values[i:i + size] for i in range(0, len(values), size)]
