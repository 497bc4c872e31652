"""The lineage results: backward (ancestors) and forward (descendants) graphs of seed lots.

Pure data and pure functions over it; :mod:`.lineage` fills them from a source. Shapes
follow the original's ``LineageEngine`` and the ``/api/trace/lineage`` answer
(DOMAIN.md section 5, MSD.md section 1.1). Node payloads are built on demand
(:meth:`BackwardLineage.nodes`) because the MSD events stage needs only ancestors, names
and roots, and 114K node dicts would cost tens of MB for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from tracebus.trace.sources.lineage_sql import SNAPSHOT_COLUMNS

#: Edge types of the original.
SPLIT, MERGE, WAFER, GD_REWORK = "split_from", "merge_source", "wafer_origin", "gd_rework_source"
_NAME, _ORDER, _OBJECTTYPE, _FIRSTNAME = (SNAPSHOT_COLUMNS.index(c) for c in
                                          ("CONTAINERNAME", "MFGORDERNAME", "OBJECTTYPE", "FIRSTNAME"))


def is_gd(snap: tuple | None) -> bool:
    """A GD (rework) lot: its work order or name starts with GD."""
    return _prefixed(snap, "GD")


def _prefixed(snap: tuple | None, prefix: str) -> bool:
    return bool(snap) and any((snap[i] or "").strip().upper().startswith(prefix) for i in (_ORDER, _NAME))


def node_type(cid: str, snap: tuple | None, wafer_ids: set[str]) -> str:
    """WAFER, GD, GC, GA, LOT or UNKNOWN, in the original's order of precedence."""
    if cid in wafer_ids:
        return "WAFER"
    for prefix in ("GD", "GC", "GA"):
        if _prefixed(snap, prefix):
            return prefix
    return "LOT" if snap and snap[_OBJECTTYPE] == "LOT" else "UNKNOWN"


@dataclass
class Graph:
    """What both directions share: container snapshots, names, typed edges."""

    seeds: list[str]
    snaps: dict[str, tuple] = field(default_factory=dict)  # cid -> SNAPSHOT_COLUMNS values
    names: dict[str, str] = field(default_factory=dict)
    edge_list: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, type), deduplicated

    def node_ids(self) -> set[str]:
        raise NotImplementedError

    def edges(self) -> list[dict]:
        """``[{from_cid, to_cid, edge_type}]`` in discovery order."""
        return [{"from_cid": a, "to_cid": b, "edge_type": t} for a, b, t in self.edge_list]

    def nodes(self) -> dict[str, dict]:
        """``{cid: {container_id, container_name, mfgorder_name, wafer_lot, node_type}}``, by CID."""
        wafer_ids = {a for a, _, t in self.edge_list if t == WAFER}
        out = {}
        for cid in sorted(self.node_ids()):
            snap = self.snaps.get(cid)
            out[cid] = {"container_id": cid, "container_name": self.names.get(cid, cid),
                        "mfgorder_name": snap[_ORDER] if snap else None,
                        "wafer_lot": snap[_FIRSTNAME] if snap else None,
                        "node_type": node_type(cid, snap, wafer_ids)}
        return out


@dataclass
class BackwardLineage(Graph):
    """Ancestors of seed lots.

    ``ancestors[seed]`` holds the seed's ancestor CIDs, sorted, *without* the seed itself, as
    the original's HTTP answer; :meth:`spool_rows` adds the seed's self row that the MSD
    aggregation joins on. ``parent_map[child]`` lists direct parents (split, merge sources,
    wafer, GD rework source), ``merge_edges[child]`` the merge sources among them.
    """

    parent_map: dict[str, list[str]] = field(default_factory=dict)
    merge_edges: dict[str, list[str]] = field(default_factory=dict)
    ancestors: dict[str, list[str]] = field(default_factory=dict)
    seed_roots: dict[str, str] = field(default_factory=dict)  # seed -> root name
    root_ids: dict[str, str] = field(default_factory=dict)  # seed -> root CID

    def node_ids(self) -> set[str]:
        out = set(self.seeds)
        for values in self.ancestors.values():
            out.update(values)
        return out

    @property
    def roots(self) -> list[str]:
        """The distinct root CIDs of the seeds, sorted."""
        return sorted(set(self.root_ids.values()))

    @property
    def total_nodes(self) -> int:
        return len(self.node_ids())

    @property
    def total_ancestor_count(self) -> int:
        """Distinct ancestors that are not seeds themselves."""
        return len(self.node_ids() - set(self.seeds))

    def fetch_cids(self) -> list[str]:
        """Seeds then their ancestors, deduplicated: the backward events fetch set."""
        out = dict.fromkeys(self.seeds)
        for seed in self.seeds:
            out.update(dict.fromkeys(self.ancestors.get(seed, ())))
        return list(out)

    def spool_rows(self) -> Iterator[tuple[str, str, str | None, str]]:
        """``(DESCENDANT_ID, ANCESTOR_ID, ANCESTOR_NAME, SEED_ROOT_NAME)``: a self row per
        seed, then one per ancestor (MSD.md section 1.1)."""
        for seed in self.seeds:
            root = self.seed_roots.get(seed, seed)
            yield seed, seed, self.names.get(seed), root
            for cid in self.ancestors.get(seed, ()):
                yield seed, cid, self.names.get(cid), root

    def to_dict(self) -> dict:
        """The ``/api/trace/lineage`` backward answer (DOMAIN.md section 5)."""
        nodes = self.node_ids()
        return {"ancestors": self.ancestors, "roots": self.roots, "seed_roots": self.seed_roots,
                "names": {c: n for c, n in self.names.items() if c in nodes},
                "parent_map": {c: p for c, p in self.parent_map.items() if c in nodes},
                "merge_edges": {c: m for c, m in self.merge_edges.items() if c in nodes},
                "nodes": self.nodes(), "edges": self.edges(), "total_nodes": len(nodes),
                "total_ancestor_count": self.total_ancestor_count}


def close_ancestors(lineage: BackwardLineage) -> None:
    """Fill ``ancestors``, ``root_ids`` and ``seed_roots`` from ``parent_map``.

    A seed's root is its parentless ancestor nearest to it (ties: the smaller name, then
    CID), or the seed itself when it has no ancestor. The original takes any parentless one.
    """
    pm = lineage.parent_map
    for seed in lineage.seeds:
        depth: dict[str, int] = {}
        frontier, level = [seed], 0
        while frontier:
            level += 1
            nxt = []
            for cid in frontier:
                for parent in pm.get(cid, ()):
                    if parent != seed and parent not in depth:
                        depth[parent] = level
                        nxt.append(parent)
            frontier = nxt
        lineage.ancestors[seed] = sorted(depth)
        tops = [c for c in depth if not pm.get(c)]
        root = min(tops, key=lambda c: (depth[c], lineage.names.get(c, ""), c)) if tops else seed
        lineage.root_ids[seed] = root
        lineage.seed_roots[seed] = lineage.names.get(root, root)


@dataclass
class ForwardLineage(Graph):
    """Descendants of seed lots: ``children_map[parent]`` = sorted split children and merge targets."""

    children_map: dict[str, list[str]] = field(default_factory=dict)
    leaf_serials: dict[str, list[str]] = field(default_factory=dict)

    def node_ids(self) -> set[str]:
        out = set(self.seeds)
        for parent, children in self.children_map.items():
            out.add(parent)
            out.update(children)
        return out

    @property
    def roots(self) -> list[str]:
        """Nodes nobody in the graph points to, sorted."""
        incoming = {c for children in self.children_map.values() for c in children}
        return sorted(self.node_ids() - incoming)

    @property
    def total_nodes(self) -> int:
        return len(self.node_ids())

    def descendants(self, seed: str) -> list[str]:
        """The seed and everything reachable from it, breadth first."""
        seen = dict.fromkeys([seed])
        frontier = [seed]
        while frontier:
            frontier = [c for p in frontier for c in self.children_map.get(p, ()) if c not in seen]
            seen.update(dict.fromkeys(frontier))
        return list(seen)

    def fetch_cids(self) -> list[str]:
        """Seeds then everything reachable from them: the forward events fetch set."""
        out: dict[str, None] = {}
        for seed in self.seeds:
            out.update(dict.fromkeys(self.descendants(seed)))
        return list(out)

    def spool_rows(self) -> Iterator[tuple[str, str]]:
        """``(SEED_ID, DESCENDANT_ID)``: the self edge, then the BFS closure."""
        for seed in self.seeds:
            for cid in self.descendants(seed):
                yield seed, cid

    def to_dict(self) -> dict:
        """The ``/api/trace/lineage`` forward answer (DOMAIN.md section 5)."""
        nodes = self.node_ids()
        return {"roots": self.roots, "children_map": self.children_map, "leaf_serials": self.leaf_serials,
                "names": {c: n for c, n in self.names.items() if c in nodes}, "nodes": self.nodes(),
                "edges": self.edges(), "total_nodes": len(nodes)}
