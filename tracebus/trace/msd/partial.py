"""The partial aggregate of MSD: its plain-data shape and the one associative, commutative merge.

A partial is ``{"v": 1, "dir": "backward"|"forward", "det": {...}, "ev": {...}}`` made only of
dicts, lists, str, int and float, so it is stored as msgpack as it is. Its leaves merge by type:

* int/float — added (counts and sums);
* list — a set, kept sorted; merged by sorted union (lot sets, reason sets, station orders);
* str — the smaller of the two (a material description: "first non-empty" made order-free);
* dict — merged key by key.

Merging is associative and commutative but not idempotent: the job layer must *replace* the
partial of a unit that ran twice, never merge it in again. Detection partials assume detection
chunks partition CONTAINERIDs (all rows of one lot in one chunk), because per-lot MAX(TRACKINQTY)
and "lot has a defect" are decided inside the chunk and then only summed.
"""

from __future__ import annotations

from typing import Any

from tracebus.errors import InvalidParams

VERSION = 1


def empty(direction: str) -> dict:
    """A partial with nothing in it (the identity of :func:`merge`)."""
    return {"v": VERSION, "dir": direction, "det": {}, "ev": {}}


def _merge_value(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return _merge_dict(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return sorted(set(a).union(b))
    if isinstance(a, str) and isinstance(b, str):
        return min(a, b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a + b
    raise InvalidParams(f"cannot merge partial values of types {type(a).__name__} and {type(b).__name__}")


def _merge_dict(a: dict, b: dict) -> dict:
    if len(a) < len(b):
        a, b = b, a
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge_value(out[k], v) if k in out else v
    return out


def merge_data(a: dict, b: dict) -> dict:
    """Merge two plain-data maps with the leaf rules above (used for per-lot detail records)."""
    return _merge_dict(a, b)


def merge(a: dict, b: dict) -> dict:
    """Merge two partials of the same direction; neither argument is modified.

    Raises:
        InvalidParams: the partials have different directions or versions.
    """
    if a.get("dir") != b.get("dir") or a.get("v") != b.get("v"):
        raise InvalidParams(f"cannot merge a {a.get('dir')} v{a.get('v')} partial "
                            f"with a {b.get('dir')} v{b.get('v')} one")
    return {"v": a["v"], "dir": a["dir"], "det": _merge_dict(a.get("det", {}), b.get("det", {})),
            "ev": _merge_dict(a.get("ev", {}), b.get("ev", {}))}


def merge_all(direction: str, partials) -> dict:
    """Merge any number of partials (an empty iterable gives :func:`empty`)."""
    out = empty(direction)
    for p in partials:
        out = merge(out, p)
    return out
