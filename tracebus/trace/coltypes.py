"""The type of every column of the trace domains, for the typed exports (Parquet, Arrow).

By column name: a name has one meaning in every domain (DOMAIN.md section 1) and in the MSD
detection rows. Both sources give timestamps as ``YYYY-MM-DD HH:MM:SS`` text (Oracle's
``TO_CHAR``, SQLite's text) and days as ``YYYY-MM-DD``: they are exported as timestamps and
dates. Quantities are integers, the consumed material quantity and the hold hours numbers
with a fraction; every other column is text (``WORKCENTERSEQUENCE_GROUP`` too: the DWH's
WORKCENTERSEQUENCE is a VARCHAR2, ``'006'``). The type names are those of
:data:`tracebus.jobs.export.TYPES`. README.md ("Results for data tools") lists the map.
"""

from __future__ import annotations

from tracebus.trace.domains import COLUMNS

TIMESTAMPS = ("TRACKINTIMESTAMP", "TRACKOUTTIMESTAMP", "TXNDATE", "TXN_TIME", "HOLDTXNDATE", "RELEASETXNDATE",
              "CREATEDATE", "COMPLETEDATE")
DATES = ("TXN_DAY",)
INTEGERS = ("TRACKINQTY", "TRACKOUTQTY", "REJECT_QTY", "STANDBY_QTY", "QTYTOPROCESS_QTY", "INPROCESS_QTY",
            "PROCESSED_QTY", "REJECT_TOTAL_QTY", "DEFECT_QTY", "REJECTQTY")
FLOATS = ("QTYCONSUMED", "HOLD_HOURS")

#: Column name -> type, for the columns that are not text.
TYPES: dict[str, str] = {**{c: "timestamp" for c in TIMESTAMPS}, **{c: "date" for c in DATES},
                         **{c: "int64" for c in INTEGERS}, **{c: "float64" for c in FLOATS}}


def types_of(domain: str) -> dict[str, str]:
    """Every column of ``domain`` with its type; {} for a section that is not a domain (its
    types are inferred)."""
    return types_of_columns(COLUMNS.get(domain, ()))


def types_of_columns(names) -> dict[str, str]:
    """Each of the column ``names`` with its type (a kind's own sections: the MSD detection rows)."""
    return {c: TYPES.get(c, "string") for c in names}
