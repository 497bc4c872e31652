"""Every statement tracebus can send to the DWH: the sources' reads and the declared query kinds'.

``tracebus sql`` prints this list; ``tests/test_dwh_schema.py`` qualifies it against the real
schema. The sources' part is :func:`tracebus.trace.sources.catalog.statements`; the query kinds
(:mod:`tracebus.trace.query`) import the sources, so their statements are added here, above both.
"""

from __future__ import annotations

from tracebus.trace.query import declared
from tracebus.trace.sources.catalog import EXAMPLE_WINDOW, Statement, origin_of, statements
from tracebus.trace.sources.queries import Dialect

_IDS = {"p0": "EQ-0001", "p1": "EQ-0002"}
_NARROW = {"n0": "GA25010101", "n1": "GA25010102"}


def every_statement(d: Dialect) -> list[Statement]:
    """The sources' statements of dialect ``d``, then one per declared query kind and selector."""
    out = statements(d)
    for kind in declared().values():
        for selector, st in kind.statements.items():
            binds = {"w0": EXAMPLE_WINDOW[0], "w1": EXAMPLE_WINDOW[1], **(_IDS if st.ids else {})}
            n_ids = len(_IDS) if st.ids else 0
            out.append(Statement(f"query.{kind.kind}.{selector}", st.text(d, n_ids), binds, origin_of(st.sql)))
            if st.narrow:  # the statement narrowed by its optional list, as a request giving it sends
                out.append(Statement(f"query.{kind.kind}.{selector}.{st.narrow}", st.text(d, n_ids, len(_NARROW)),
                                     {**binds, **_NARROW}, origin_of(st.sql)))
    return out
