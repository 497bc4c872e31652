"""Backward attribution partitioned by lot: each node's output keys, then per-lot unions (MSD.md §1.4, §1.8).

The backward charts count each defective lot once per output key its lineage reaches (the join
J deduplicated per (key, lot)). Partitioning the *lots* makes that additive: a unit that holds
a set of lots, and the event rows of every lineage node of those lots (each lot and its
ancestors), computes for each lot the union of the keys of its nodes and adds the lot's
(1, lot_defect, lot_input) to each key of that union. No other unit holds that lot, so the
cells of all units are summed, never unioned: nothing the size of a lot set leaves a unit.

Three steps, all pure:

1. :class:`NodeFold` — event rows of a backward domain → per node, the ids of the output
   keys its rows reach, of its EQUIPMENTIDs (affected_machine_count) and of its
   TRIM(EQUIPMENTID)s (the detail's UPSTREAM_MACHINE_COUNT), the detail record of each CID it
   owns, and the smallest description per material key (lists, repeats allowed: every reader
   unions them);
2. :func:`lot_unions` — per lot, the union of its nodes' ids (after :func:`combine` put the
   folds of several domains in one id space);
3. :func:`lot_cells` — per key, ``[lots, Σ lot_defect, Σ lot_input]`` over the defective
   lots; :func:`add_cells` sums those of many units and :func:`output_cells` turns the sum
   into the finalize's cells (:func:`tracebus.trace.msd.backward.key_cells`' shape). The
   EQUIPMENTIDs reached need no counts, only their union (:func:`reached`).

A key is a string tagged by what it counts for: :data:`MACHINE` (by_machine,
TRIM(EQUIPMENTNAME)), :data:`ATTR` (attribution: group or ``(未知)``, name, TRIM(EQUIPMENTID)),
:data:`PART` (by_material), :data:`MAT_LOT` (materials_attribution: part,
TRIM(MATERIALLOTNAME)), :data:`EQUIPMENT` (affected_machine_count: the raw EQUIPMENTID, no
station filter) and :data:`DETAIL_EQUIPMENT`. The station filter (``upstream``) is applied
when a key is made, so the same rows give the same keys in every unit. Folds work on small
ints (a key's id: the fold's ``base`` plus its position in the fold's ``table``): a few
hundred distinct machines and materials reach over a million rows, so each distinct cell
combination is turned into keys once (memoized) and ints are what is unioned, summed and
packed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from tracebus.trace.domains import workcenter_group
from tracebus.trace.msd._util import SEP, UNKNOWN, text, values

MACHINE, ATTR, PART, MAT_LOT, EQUIPMENT, DETAIL_EQUIPMENT = "m", "a", "p", "l", "x", "e"
_COLUMNS = ("CONTAINERID", "MATERIALPARTNAME", "MATERIALLOTNAME", "MATERIALDESCRIPTION",
            "EQUIPMENTNAME", "EQUIPMENTID", "WORKCENTER_GROUP")
_COLUMNS_BY_WORKCENTER = _COLUMNS[:-1] + ("WORKCENTERNAME",)
#: lot_cells packs (lots, defect, input) in one int of three 64-bit fields when it can.
_FIELD = 64
_MASK = (1 << _FIELD) - 1
_MAX_PACKED = 1 << 48
#: Ids one fold may give out (see :class:`NodeFold`'s ``base``).
ID_SPAN = 1 << 24


def _str(v: Any) -> str:
    return v if v.__class__ is str else text(v)


@lru_cache(maxsize=4096)
def _group_of(workcenter) -> str | None:
    """The group of a workcenter name (a few dozen distinct names reach every fold)."""
    group = workcenter_group(text(workcenter))
    return group.name if group else None


class NodeRecord(NamedTuple):
    """What a lineage node's rows give its lots' detail rows: its machines (``station SEP
    machine``, UPSTREAM_MACHINES) and materials (``part SEP lot``, UPSTREAM_MATERIALS); repeats
    are rare (they need two workcenters of one group on one machine) and harmless."""

    machines: list
    materials: list

    def stored(self) -> dict:
        """The record as the CID hash stores it (the detail pages read ``m`` and ``t``)."""
        return {"m": self.machines, "t": self.materials}


class NodeFold:
    """The fold of one unit's backward event rows (any domain, columns looked up by name).

    Attributes:
        table: key id - ``base`` -> tagged key.
        nodes: CID -> key ids its rows reach (a list: a key may repeat).
        machines: CID -> key ids of its raw EQUIPMENTIDs (:data:`EQUIPMENT`), a list.
        equipment: CID -> key ids of its TRIM(EQUIPMENTID)s (:data:`DETAIL_EQUIPMENT`), a list.
        records: CID of ``own`` -> its :class:`NodeRecord` (the detail's UPSTREAM_MACHINES and
            UPSTREAM_MATERIALS).
        desc: ``part SEP lot`` -> the smallest non-empty MATERIALDESCRIPTION over every row.
        rows: rows of ``own`` CIDs folded.

    Args:
        own: the CIDs whose rows this unit counts and whose records it keeps.
        upstream: :attr:`MsdParams.upstream_groups` (None: no station filter).
        base: the first id; folds that :func:`combine` will join (one per domain) take
            distinct bases, :data:`ID_SPAN` apart, so their ids need no renumbering.
    """

    def __init__(self, own: Iterable[str], upstream: frozenset | None, base: int = 0):
        self.own = own if isinstance(own, (set, frozenset)) else set(own)
        self.upstream = upstream
        self.base = base
        self.table: list[str] = []
        self._ids: dict[str, int] = {}
        # Memos of what a distinct cell gives, worked out on its first row (by the ``_*_cell``
        # methods). Their values are non-empty tuples, so ``memo.get(cell) or make(cell)`` reads them.
        self._nodes: dict[Any, tuple] = {}                 # CONTAINERID cell -> :meth:`_node_cell`
        self._machines: dict[tuple, tuple] = {}            # (group, name, id) -> :meth:`_machine`
        self._by_workcenter: dict[tuple, tuple] = {}       # (workcenter, name, id) -> :meth:`_machine`
        self._materials: dict[tuple, tuple] = {}           # (part, lot, desc) -> :meth:`_material`
        self.nodes: dict[str, list] = {}
        self.machines: dict[str, list] = {}
        self.equipment: dict[str, list] = {}
        self.records: dict[str, NodeRecord] = {}
        self.desc: dict[str, str] = {}
        self.rows = 0

    def _id(self, key: str) -> int:
        found = self._ids.get(key)
        if found is None:
            if len(self.table) >= ID_SPAN:
                raise ValueError(f"more than {ID_SPAN} distinct keys in one fold")
            found = self._ids[key] = self.base + len(self.table)
            self.table.append(key)
        return found

    def _machine(self, group, name, eq_id) -> tuple:
        """(key ids, EQUIPMENTID id or None, detail equipment id or None, detail machine or
        None) of a machine cell."""
        name, eq_text, group = _str(name).strip(), _str(eq_id).strip(), _str(group)
        ids = []
        if name and (self.upstream is None or group in self.upstream):
            ids.append(self._id(MACHINE + SEP + name))
            ids.append(self._id(ATTR + SEP + (group.strip() or UNKNOWN) + SEP + name + SEP + eq_text))
        raw = None if eq_id is None else self._id(EQUIPMENT + SEP + (eq_id if eq_id.__class__ is str else str(eq_id)))
        return (tuple(ids), raw, self._id(DETAIL_EQUIPMENT + SEP + eq_text) if eq_text else None,
                (group.strip() or UNKNOWN) + SEP + name if name else None)

    def _material(self, part, mlot) -> tuple:
        """(key ids, ``part SEP lot`` or None) of a material cell."""
        part = _str(part).strip()
        if not part:
            return (), None
        mkey = part + SEP + _str(mlot).strip()
        return (self._id(PART + SEP + part), self._id(MAT_LOT + SEP + mkey)), mkey

    def _node_cell(self, cell) -> tuple:
        """(CID, its list in :attr:`nodes`, its :class:`NodeRecord` if the unit owns it, else
        None) of a CONTAINERID cell, made on the cell's first row."""
        cid = cell if cell.__class__ is str else text(cell)
        keys = self.nodes.get(cid)
        if keys is None:
            keys = self.nodes[cid] = []
        rec = None
        if cid in self.own:
            rec = self.records.get(cid)
            if rec is None:
                rec = self.records[cid] = NodeRecord([], [])
        found = self._nodes[cell] = (cid, keys, rec)
        return found

    def _machine_cell(self, by_workcenter: bool, group, name, eq_id) -> tuple:
        """:meth:`_machine` of a machine cell, made on the cell's first row (``group`` is a
        WORKCENTERNAME when ``by_workcenter``)."""
        memo = self._by_workcenter if by_workcenter else self._machines
        found = memo[(group, name, eq_id)] = self._machine(_group_of(group) if by_workcenter else group, name, eq_id)
        return found

    def _material_cell(self, part, mlot, d) -> tuple:
        """:meth:`_material` of a material cell, made on the cell's first row. The cell's
        description enters :attr:`desc` then: the smallest one per material key is kept, so the
        cell's later rows could not change it."""
        found = self._materials[(part, mlot, d)] = self._material(part, mlot)
        mkey = found[1]
        if mkey is not None and d is not None:
            d = _str(d).strip()
            if d and (mkey not in self.desc or d < self.desc[mkey]):
                self.desc[mkey] = d
        return found

    def fold(self, columns: Sequence[str], rows) -> None:
        """Fold one batch. Rows without a WORKCENTER_GROUP column but with a WORKCENTERNAME
        get the group of their workcenter (:func:`tracebus.trace.domains.workcenter_group`),
        worked out once per distinct machine cell.

        The loop runs once per row: what a distinct cell gives (its CID's lists, its key ids) is
        worked out on its first row by the ``_*_cell`` methods and read from their memos after."""
        equipment, reached = self.equipment, self.machines
        node_of, materials = self._nodes, self._materials
        by_workcenter = "WORKCENTER_GROUP" not in columns and "WORKCENTERNAME" in columns
        machines = self._by_workcenter if by_workcenter else self._machines
        node_cell, machine_cell, material_cell = self._node_cell, self._machine_cell, self._material_cell
        for cid, part, mlot, d, name, eq_id, group in values(columns, rows,
                                                             _COLUMNS_BY_WORKCENTER if by_workcenter else _COLUMNS):
            cid, keys, rec = node_of.get(cid) or node_cell(cid)
            mkey = None
            if part is not None:
                ids, mkey = materials.get((part, mlot, d)) or material_cell(part, mlot, d)
                keys.extend(ids)
            machine = None
            if name is not None or eq_id is not None:
                ids, raw, eq_key, machine = (machines.get((group, name, eq_id))
                                             or machine_cell(by_workcenter, group, name, eq_id))
                if ids:
                    keys.extend(ids)
                if raw is not None:
                    reached.setdefault(cid, []).append(raw)
                if eq_key is not None:
                    equipment.setdefault(cid, []).append(eq_key)
            if rec is not None:
                self.rows += 1
                if machine is not None:
                    rec.machines.append(machine)
                if mkey is not None:
                    rec.materials.append(mkey)


def combine(folds: Sequence[Sequence]) -> tuple[dict[int, str], list[list[Mapping]]]:
    """Several folds' ``(base, table, *maps)`` (one per domain, distinct bases; each map
    ``node -> ids``, e.g. ``nodes, machines, equipment``) in one id space.

    Returns:
        ``(table, maps)``: ``table`` maps every id to its key; ``maps[i]`` lists every fold's
        i-th map (for :func:`lot_unions` and :func:`reached`, which read them side by side
        rather than concatenate them). A key that two folds both made (a materials row's
        machine when there is no station filter) keeps the first fold's id.
    """
    table: dict[int, str] = {}
    first: dict[str, int] = {}
    out: list[list[Mapping]] = []
    for base, part_table, *maps in folds:
        out.extend([] for _ in range(len(maps) - len(out)))
        remap = {}
        for i, k in enumerate(part_table, start=base):
            if k in first:
                remap[i] = first[k]
            else:
                first[k] = i
                table[i] = k
        for into, part in zip(out, maps):
            if remap:
                part = {node: [remap.get(i, i) for i in found] for node, found in part.items()}
            into.append(part)
    return table, out


def reached(lineage: Mapping[str, Iterable[str]], maps: Sequence[Mapping[str, Iterable]]) -> set:
    """The union of the ids that ``maps`` give every node of every lot of ``lineage``."""
    out: set = set()
    for members in lineage.values():
        for node in members:
            for ids_of in maps:
                found = ids_of.get(node)
                if found:
                    out.update(found)
    return out


def lot_unions(lineage: Mapping[str, Iterable[str]], maps: Sequence[Mapping[str, Iterable]]) -> dict[str, set]:
    """Per lot of ``lineage`` (``lot -> its nodes``, the lot itself included), the union of
    the ids that ``maps`` give its nodes (a node without rows adds nothing)."""
    out = {}
    for lot, members in lineage.items():
        union: set = set()
        for node in members:
            for ids_of in maps:
                found = ids_of.get(node)
                if found:
                    union.update(found)
        out[lot] = union
    return out


def lot_cells(unions: Mapping[str, set], defective: Mapping[str, Mapping[str, int]]) -> dict:
    """Per id, ``[lots, Σ lot_defect, Σ lot_input]`` over the defective lots of ``unions``
    (``defective``: ``lot -> {"d": lot_defect, "i": lot_input}``, detection's record).

    This walks every (lot, key) pair; with integer quantities the three sums travel as one
    int (three 64-bit fields) so each pair is a single dict update.
    """
    lots = [(unions[lot], v["d"], v["i"]) for lot, v in defective.items() if lot in unions]
    if len(lots) < 1 << 15 and all(type(d) is int and type(i) is int and 0 <= d < _MAX_PACKED
                                   and 0 <= i < _MAX_PACKED for _, d, i in lots):
        acc: dict = {}
        get = acc.get
        for union, d, i in lots:
            w = 1 << 2 * _FIELD | d << _FIELD | i
            for k in union:
                acc[k] = get(k, 0) + w
        return {k: [w >> 2 * _FIELD, w >> _FIELD & _MASK, w & _MASK] for k, w in acc.items()}
    cells: dict = {}
    for union, d, i in lots:
        for k in union:
            cell = cells.get(k)
            if cell is None:
                cells[k] = [1, d, i]
            else:
                cell[0] += 1
                cell[1] += d
                cell[2] += i
    return cells


def add_cells(into: dict, cells: Iterable[Sequence]) -> None:
    """Add ``[key, lots, defect, input]`` cells (another unit's :func:`lot_cells`) into ``into``."""
    for k, n, d, i in cells:
        cell = into.get(k)
        if cell is None:
            into[k] = [n, d, i]
        else:
            cell[0] += n
            cell[1] += d
            cell[2] += i


def untag(key: str) -> str:
    """A tagged key without its tag (an :data:`EQUIPMENT` key's EQUIPMENTID)."""
    return key.partition(SEP)[2]


def output_cells(cells: Mapping[str, Sequence]) -> dict[str, dict]:
    """Summed cells by tagged key → the finalize's ``cells`` by output: ``machine``,
    ``material``, ``attr`` (tuples), ``mattr`` (tuples), each ``{key: {"n", "d", "i"}}``."""
    out: dict[str, dict] = {"machine": {}, "material": {}, "attr": {}, "mattr": {}}
    names = {MACHINE: "machine", PART: "material", ATTR: "attr", MAT_LOT: "mattr"}
    for k, (n, d, i) in cells.items():
        tag, _, rest = k.partition(SEP)
        name = names.get(tag)
        if name is None or not n:
            continue
        out[name][tuple(rest.split(SEP)) if tag in (ATTR, MAT_LOT) else rest] = {"n": n, "d": d, "i": i}
    return out
