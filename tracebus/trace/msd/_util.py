"""Small pure helpers shared by the MSD folds and finalizers: value coercion, row access, keys, charts.

Every chart sort breaks ties on the name so that the output does not depend on the order in
which chunks arrived (the original left ties to the database or to dict insertion order).
Rates use Python's ``round`` (half to even on the binary value), as the original's Python code
did for every aggregation field.
"""

from __future__ import annotations

import datetime as _dt
import math
from itertools import repeat
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

#: Separator of composite keys stored as one string in a partial (msgpack maps need simple keys).
SEP = "\x1f"
UNKNOWN = "(未知)"
OTHER = "其他"
TOP_N = 10


def text(value: Any) -> str:
    """``_safe_str``: None/NaN → ``""``, else ``str(value)`` (not trimmed)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def num(value: Any) -> float | int | None:
    """A numeric cell as int or float; None/NaN/non-numeric → None (a SQL NULL)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() else f


def to_int(value: Any) -> int:
    """``_safe_int``: a number truncated to int; NULL → 0."""
    n = num(value)
    return 0 if n is None else int(n)


def day_of(value: Any) -> str | None:
    """The ``YYYY-MM-DD`` date of a timestamp cell (datetime, date or ISO-like string)."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.date().isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    s = str(value)
    return s[:10] if s else None


def getter(columns: Sequence[str] | None) -> Callable[[Any, str], Any]:
    """Return ``get(row, name)`` for dict rows, or for tuples laid out as ``columns``.

    A column missing from ``columns`` reads as None, so a source without e.g.
    MATERIALDESCRIPTION is tolerated.
    """
    index = {name: i for i, name in enumerate(columns or ())}

    def get(row: Any, name: str) -> Any:
        # Tuples and lists first: the ABC check of Mapping costs more than the lookup itself,
        # and the folds call this once per column per row.
        if row.__class__ is tuple or row.__class__ is list:
            i = index.get(name)
            return None if i is None or i >= len(row) else row[i]
        if isinstance(row, Mapping):
            return row.get(name)
        i = index.get(name)
        return None if i is None or i >= len(row) else row[i]

    return get


def values(columns: Sequence[str] | None, rows: Iterable[Any], names: Sequence[str]) -> Iterator[tuple]:
    """Per row, the tuple of its cells ``names`` as :func:`getter` reads them (a missing column
    reads as None), for a fold to unpack in its ``for`` statement.

    Rows that are all tuples or lists as long as ``columns`` are read column by column with
    ``operator.itemgetter`` (in C); any other batch (dicts, short rows) goes through ``get``.
    """
    if not isinstance(rows, (list, tuple)):
        rows = list(rows)
    index = {name: i for i, name in enumerate(columns or ())}
    idx = [index.get(name) for name in names]
    present = [i for i in idx if i is not None]
    if set(map(type, rows)) <= {tuple, list} and (not present or not rows
                                                  or min(map(len, rows)) > max(present)):
        n = len(rows)
        return zip(*[repeat(None, n) if i is None else map(itemgetter(i), rows) for i in idx])
    get = getter(columns)
    return (tuple(get(row, name) for name in names) for row in rows)


def key(*parts: str) -> str:
    """Join a composite key."""
    return SEP.join(parts)


def unkey(k: str) -> list[str]:
    """Split a composite key."""
    return k.split(SEP)


def rate_pct(part: float, whole: float, digits: int = 4) -> float:
    """``round(part / whole * 100, digits)``, 0.0 without a denominator."""
    return round(part / whole * 100, digits) if whole else 0.0


def rate_frac(part: float, whole: float, digits: int = 6) -> float:
    """``round(part / whole, digits)``, 0.0 without a denominator."""
    return round(part / whole, digits) if whole else 0.0


def add_cumulative(items: list[dict], field: str = "defect_qty") -> list[dict]:
    """Set ``cumulative_pct`` = running Σ field / Σ field of ``items`` (round 2)."""
    total = sum(i[field] for i in items)
    running = 0
    for item in items:
        running += item[field]
        item["cumulative_pct"] = round(running / total * 100, 2) if total else 0.0
    return items


def pareto(rows: Iterable[tuple[str, int, int, int]], limit: int = TOP_N) -> list[dict]:
    """``_to_pareto_items``: ``(name, lot_count, defect, input)`` → top ``limit`` items, no 其他."""
    ranked = sorted(rows, key=lambda r: (-r[2], r[0]))[:limit]
    items = [{"name": n, "lot_count": int(lots), "defect_qty": int(d), "input_qty": int(i),
              "defect_rate": rate_pct(int(d), int(i))} for n, lots, d, i in ranked]
    return add_cumulative(items)


def lot_table(lot_values: Mapping[str, Mapping[str, int]]) -> tuple[dict, dict | None, frozenset]:
    """:func:`lot_sums`'s fast form of ``lot_values``: ``(lot -> lot_defect << 64 | lot_input,
    None, lots)`` when every value is a non-negative int small enough that the sums cannot
    carry from input into defect (one ``map`` per key instead of two), else ``(lot ->
    lot_defect, lot -> lot_input, lots)``."""
    d_of = {k: v["d"] for k, v in lot_values.items()}
    i_of = {k: v["i"] for k, v in lot_values.items()}
    values = [*d_of.values(), *i_of.values()]
    if all(type(x) is int and x >= 0 for x in values) and max(i_of.values(), default=0) * (len(i_of) + 1) < _CARRY:
        return {k: d << 64 | i_of[k] for k, d in d_of.items()}, None, frozenset(lot_values)
    return d_of, i_of, frozenset(lot_values)


_CARRY = 1 << 64


def lot_sums(lots: Iterable[str], lot_values) -> tuple[int, int, int]:
    """(lot count, Σ lot_defect, Σ lot_input) over the lots found in ``lot_values``.

    ``lot_values`` is ``{lot: {"d", "i"}}`` or, faster when called per key, its
    :func:`lot_table`: the sums then run in C (set intersection, ``map``), which matters when
    the finalize walks millions of (key, lot) pairs.
    """
    d_of, i_of, known = lot_values if isinstance(lot_values, tuple) else lot_table(lot_values)
    # set & set walks the smaller one; set.intersection(dict) would walk the whole dict per call.
    present = (lots if isinstance(lots, (set, frozenset)) else set(lots)) & known
    if i_of is None:
        both = sum(map(d_of.__getitem__, present))
        return len(present), both >> 64, both & (_CARRY - 1)
    return len(present), sum(map(d_of.__getitem__, present)), sum(map(i_of.__getitem__, present))
