"""CSV cells that a spreadsheet would run as a formula are neutralised (OWASP, "CSV Injection").

A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed
with ``'``, which spreadsheets show as text and do not evaluate. Database values reach the
exports as they are, and the exports are opened in spreadsheets. Numbers are left alone (a
negative number is no formula).
"""

from __future__ import annotations

from typing import Any, Iterable

#: First characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value: Any) -> Any:
    """``value``, with ``'`` in front when it is text that starts a formula."""
    if type(value) is str and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def neutral_row(row: Iterable[Any]) -> list:
    return [neutral(v) for v in row]
