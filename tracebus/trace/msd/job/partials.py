"""What an MSD unit leaves for the units of later stages, as typed records.

Each record is stored as the unit's partial (committed with its chunks, fenced), as a msgpack
map with the short keys it always had, so a partial written before a deploy reads the same
after it:

* :class:`DetectionPartial` (forward ``detection`` units): ``{"p"}``;
* :class:`EventsPartial` (each event domain's units): ``{"p", "rows"[, "keys"]}``, the fold of
  a backward chunk (:class:`FoldKeys`) packed apart so the finalize does not decode it;
* :class:`DetailPartial` (``detail`` units): ``{"sort", "cells"[, "p", "keys", "eqid"]}``.

``p`` is always the MSD library's mergeable partial (:mod:`tracebus.trace.msd.partial`).
"""

from __future__ import annotations

from typing import NamedTuple

from tracebus.trace.msd.job.plan import pack, unpack


class DetectionPartial(NamedTuple):
    """A forward detection unit's fold of its chunk's detection rows."""

    part: dict

    def pack(self) -> bytes:
        return pack({"p": self.part})

    @classmethod
    def unpack(cls, raw: bytes) -> "DetectionPartial":
        return cls(unpack(raw)["p"])


class FoldKeys(NamedTuple):
    """A backward events unit's :class:`~tracebus.trace.msd.lots.NodeFold` as the detail unit of
    its chunk reads it (:func:`tracebus.trace.msd.lots.combine` takes these five)."""

    base: int
    table: list
    nodes: dict
    machines: dict
    equipment: dict


class EventsPartial(NamedTuple):
    """An events unit's partial: the aggregation partial, the rows it counted and, backward,
    its fold's keys (packed)."""

    part: dict
    rows: int
    keys: bytes | None = None

    @classmethod
    def with_fold(cls, part: dict, rows: int, fold: FoldKeys) -> "EventsPartial":
        return cls(part, rows, pack(list(fold)))

    def fold(self) -> FoldKeys | None:
        return None if self.keys is None else FoldKeys(*unpack(self.keys))

    def pack(self) -> bytes:
        value = {"p": self.part, "rows": self.rows}
        if self.keys is not None:
            value["keys"] = self.keys
        return pack(value)

    @classmethod
    def unpack(cls, raw: bytes) -> "EventsPartial":
        value = unpack(raw)
        return cls(value["p"], value.get("rows", 0), value.get("keys"))


class DetailPartial(NamedTuple):
    """A detail unit's partial.

    Attributes:
        sort: the sort keys of its stored rows (:func:`tracebus.trace.msd.job.detailrows.store_rows`).
        filter_cells: its rows counted per filter cell (``cells``).
        part: backward, the chunk's detection partial; forward None.
        key_cells: backward, per output key ``[key, lots, defect, input]`` of its defective
            lots (``keys``, :func:`tracebus.trace.msd.lots.lot_cells`).
        eqid: backward, the equipment ids its defective lots' lineage reaches.
    """

    sort: dict
    filter_cells: list
    part: dict | None = None
    key_cells: list = []
    eqid: list = []

    def pack(self) -> bytes:
        value = {"sort": self.sort, "cells": self.filter_cells}
        if self.part is not None:
            value.update(p=self.part, keys=self.key_cells, eqid=self.eqid)
        return pack(value)

    @classmethod
    def unpack(cls, raw: bytes) -> "DetailPartial":
        value = unpack(raw)
        return cls(value["sort"], value["cells"], value.get("p"), value.get("keys", []), value.get("eqid", []))
