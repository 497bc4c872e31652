"""Lineage reads of a source: ancestors (backward) and descendants (forward) of seed lots.

:class:`LineageReads` runs on any :class:`~.reads.Reader` (a source); two kinds use it, so it is
here and not in a kind's folder: the MSD kind (its events stage's lineage) and the stage kind
(the lineage stage; its query-tool trees, :mod:`tracebus.trace.stages.trees`, build on it).

The ascending walk goes one level at a time, each level a few statements per IN list of at most
:data:`~.batching.IN_LIMIT` CIDs (:mod:`.lineage_sql`), never one lot at a time: 70K seeds with
four levels of ancestors cost a few hundred IN-list queries, each an index search; its merge
sources (DW_MES_PJ_COMBINEDASSYLOTS has no LOTID index, as for the original) come from one
statement per request that returns the merge edges of every level it can reach. The
descending walk reads its edges in one statement (DW_MES_CONTAINER has no SPLITFROMID index:
a statement per level would read all of it per level). Links are those of the
original's ``LineageEngine``: splits (SPLITFROMID), merges (``DW_MES_PJ_COMBINEDASSYLOTS``), wafer
origin (FIRSTNAME names the wafer lot) and GD rework (ORIGINALCONTAINERID), to a depth of
:data:`MAX_DEPTH` levels. Unlike the original, which follows merges one hop only, every
link is followed at every level, so the ancestors are the full closure.
"""

from __future__ import annotations

import json
from collections import defaultdict
from operator import itemgetter
from typing import Iterable

from tracebus.trace.sources import lineage_sql
from tracebus.trace.sources.batching import in_lists, unique_cids, walk_groups
from tracebus.trace.sources.genealogy import (GD_REWORK, MERGE, SPLIT, WAFER, BackwardLineage, ForwardLineage, close_ancestors, is_gd)
from tracebus.trace.sources.reads import Reads

#: Levels followed from a seed (the original's ``CONNECT BY ... LEVEL <= 20``).
MAX_DEPTH = 20
_ID = lineage_sql.SNAPSHOT_COLUMNS.index
_NAME, _FIRST, _ORIG, _SPLIT = (_ID(c) for c in ("CONTAINERNAME", "FIRSTNAME", "ORIGINALCONTAINERID",
                                                   "SPLITFROMID"))
_at = itemgetter(3)  # a merge row's position in its statement (:meth:`LineageReads._merge_edges_up`)


def _level_merges(frontier: list[str], reach: dict[str, list[tuple]], merge_names: dict[str, str]) -> dict[str, list[str]]:
    """target -> its merge sources, for the lots of one level of the ascending walk (``reach``:
    :meth:`LineageReads._merge_edges_up`), in the statement's order. Adds to ``merge_names`` the
    name a merge row gives its source (the first one met)."""
    merges: dict[str, list[str]] = defaultdict(list)
    for target, source, name, _ in sorted((r for c in frontier for r in reach.get(c, ())), key=_at):
        merges[target].append(source)
        if name:
            merge_names.setdefault(source, name)
    return merges


class LineageReads(Reads):
    """Backward and forward lineage over a source: ``LineageReads(source).lineage_backward(seeds)``."""

    def _each(self, sql_for, values: list[str], wide: bool = False) -> Iterable[tuple]:
        """The rows of ``sql_for`` for ``values``: one statement per IN list of 1,000, or with
        ``wide`` per ``max_binds`` values (a statement that reads its table in full anyway; its
        values bound as ``:p0 ..`` in Oracle, as one JSON array ``:ids`` in SQLite)."""
        if not wide:
            for group, params in in_lists(values):
                yield from self._rows(sql_for(self.dialect, len(group)), params)
            return
        size = self.dialect.max_binds
        for start in range(0, len(values), size):
            group = values[start:start + size]
            binds = ({f"p{i}": v for i, v in enumerate(group)} if self.dialect.name == "oracle"
                     else {"ids": json.dumps(group)})
            yield from self._rows(sql_for(self.dialect, len(group)), binds)

    def _snapshots(self, cids: list[str]) -> dict[str, tuple]:
        return {row[0]: row for row in self._each(lineage_sql.snapshot, cids)}

    def _wafers(self, names: set[str], cache: dict[str, str | None]) -> None:
        """Resolve FIRSTNAMEs to wafer CIDs into ``cache`` (None when no LOT has that name)."""
        wanted = sorted(n for n in names if n and n not in cache)
        for cid, name in self._each(lineage_sql.ids_by_name, wanted):
            if cache.get(name) is None or cid < cache[name]:  # duplicate names: smallest CID, deterministically
                cache[name] = cid
        for name in wanted:
            cache.setdefault(name, None)

    def _parents(self, cid: str, snap: tuple | None, merges: list, wafers: dict) -> list[tuple[str, str]]:
        """Direct parents of one lot with their edge types, in the original's order."""
        links = []
        if snap is not None:
            if snap[_SPLIT] and snap[_SPLIT] != cid:
                links.append((snap[_SPLIT], SPLIT))
            links += [(source, MERGE) for source in sorted(merges) if source != cid]
            wafer = wafers.get(snap[_FIRST] or "")
            if wafer and wafer != cid:
                links.append((wafer, WAFER))
            source = snap[_ORIG] or snap[_SPLIT]
            if is_gd(snap) and source and source != cid:
                links.append((source, GD_REWORK))
        else:
            links += [(source, MERGE) for source in sorted(merges) if source != cid]
        return links

    def _merge_edges_up(self, seeds: list[str], depth: int) -> dict[str, list[tuple]]:
        """target -> [(target, source, source name, position)] of the merge edges into every
        lot the ascending walk can reach within ``depth`` levels: one statement
        (:func:`.lineage_sql.merge_sources_up`) per ``max_binds`` seeds in Oracle, one in SQLite,
        so one read of DW_MES_PJ_COMBINEDASSYLOTS per request whatever the depth. A target is
        kept from the first statement that returns it (all its rows come together), so each
        merge row once; the position keeps the statement's order for each level's rows."""
        out: dict[str, list[tuple]] = defaultdict(list)
        if not seeds or depth < 0:
            return out
        done: set[str] = set()
        position = 0
        for group in walk_groups(self.dialect, seeds):
            sql = lineage_sql.merge_sources_up(self.dialect, len(group), depth)
            got: set[str] = set()
            for target, source, name in self._rows(sql, {f"p{i}": c for i, c in enumerate(group)}):
                if target not in done:
                    got.add(target)
                    out[target].append((target, source, name, position))
                    position += 1
            done |= got
        return out

    def lineage_backward(self, seed_cids: Iterable[str], max_depth: int = MAX_DEPTH) -> BackwardLineage:
        """Resolve the ancestors of seed lots, level by level.

        Args:
            seed_cids: the seeds; stripped and deduplicated, order kept.
            max_depth: levels to follow up from a seed.

        Returns:
            A :class:`~.genealogy.BackwardLineage`: ``ancestors`` (seed -> sorted CIDs,
            without the seed), ``names``, ``seed_roots`` (seed -> root name), ``parent_map``,
            ``merge_edges``, ``roots``, ``total_nodes``, ``total_ancestor_count``, and
            ``nodes()`` / ``edges()`` / ``to_dict()`` / ``spool_rows()`` / ``fetch_cids()``.

        Raises:
            InvalidParams: bad CIDs. SourceError: the database fails.
        """
        out = BackwardLineage(seeds=unique_cids(seed_cids))
        wafers: dict[str, str | None] = {}
        seen_edges: set[tuple[str, str, str]] = set()
        merge_names: dict[str, str] = {}
        frontier, seen = list(out.seeds), set(out.seeds)
        reach = self._merge_edges_up(out.seeds, max_depth - 1)
        for _ in range(max_depth):
            if not frontier:
                break
            snaps = self._snapshots(frontier)
            out.snaps.update(snaps)
            merges = _level_merges(frontier, reach, merge_names)
            self._wafers({s[_FIRST] for s in snaps.values()}, wafers)
            frontier = self._link_level(out, frontier, snaps, merges, wafers, seen_edges, seen)
        out.snaps.update(self._snapshots(frontier))  # the last level: names only, not followed
        out.names = {c: s[_NAME] for c, s in out.snaps.items() if s[_NAME]}
        for cid, name in merge_names.items():  # a lot without a CONTAINERNAME: its merge row's name
            out.names.setdefault(cid, name)
        close_ancestors(out)
        return out

    def _link_level(self, out: BackwardLineage, frontier: list[str], snaps: dict, merges: dict[str, list[str]],
                    wafers: dict, seen_edges: set, seen: set) -> list[str]:
        """Record each frontier lot's parents, merge parents and new edges in ``out``; returns the
        next level: the parents not seen before, in the order met."""
        nxt = []
        for cid in frontier:
            links = self._parents(cid, snaps.get(cid), merges.get(cid, []), wafers)
            parents = list(dict.fromkeys(p for p, _ in links))
            if parents:
                out.parent_map[cid] = parents
            if merges.get(cid):
                out.merge_edges[cid] = [p for p, kind in links if kind == MERGE]
            for parent, kind in links:
                if (parent, cid, kind) not in seen_edges:
                    seen_edges.add((parent, cid, kind))
                    out.edge_list.append((parent, cid, kind))
                if parent not in seen:
                    seen.add(parent)
                    nxt.append(parent)
        return nxt

    def _descendant_edges(self, seeds: list[str], depth: int) -> dict[str, list[tuple[str, str]]]:
        """parent -> [(child, edge type)] of the edges of the descending walk: one statement
        (:func:`.lineage_sql.descendant_edges`) per ``max_binds`` seeds in Oracle, one in SQLite,
        so one read of DW_MES_CONTAINER per request whatever the depth."""
        out: dict[str, list[tuple[str, str]]] = defaultdict(list)
        if not seeds:
            return out
        for group in walk_groups(self.dialect, seeds):
            sql = lineage_sql.descendant_edges(self.dialect, len(group), depth)
            for parent, child, kind in self._rows(sql, {f"p{i}": c for i, c in enumerate(group)}):
                out[parent].append((child, kind))
        return out

    def lineage_forward(self, seed_cids: Iterable[str], max_depth: int = MAX_DEPTH) -> ForwardLineage:
        """Resolve the descendants of seed lots: a BFS over split children and merge targets,
        level by level over the edges one statement found (:meth:`_descendant_edges`).

        Args:
            seed_cids: the seeds; stripped and deduplicated, order kept.
            max_depth: levels to follow down from a seed.

        Returns:
            A :class:`~.genealogy.ForwardLineage`: ``children_map`` (parent -> sorted
            children), ``roots``, ``names``, ``leaf_serials`` (leaf -> FINISHEDNAMEs),
            ``total_nodes``, and ``nodes()`` / ``edges()`` / ``to_dict()`` /
            ``spool_rows()`` / ``fetch_cids()``.

        Raises:
            InvalidParams: bad CIDs. SourceError: the database fails.
        """
        out = ForwardLineage(seeds=unique_cids(seed_cids))
        reach = self._descendant_edges(out.seeds, max_depth)
        children: dict[str, set[str]] = defaultdict(set)
        frontier, seen = list(out.seeds), set(out.seeds)
        for _ in range(max_depth):
            if not frontier:
                break
            found = [(p, c, kind) for p in frontier for c, kind in reach.get(p, ())]
            nxt = []
            for parent, child, kind in sorted(found):
                if child == parent or child in children[parent]:
                    continue
                children[parent].add(child)
                out.edge_list.append((parent, child, kind))
                if child not in seen:
                    seen.add(child)
                    nxt.append(child)
            frontier = nxt
        out.children_map = {p: sorted(c) for p, c in children.items() if c}
        nodes = sorted(out.node_ids())
        out.snaps = self._snapshots(nodes)
        out.names = {c: s[_NAME] for c, s in out.snaps.items() if s[_NAME]}
        serials: dict[str, set[str]] = defaultdict(set)
        for cid, finished in self._each(lineage_sql.leaf_serials, [c for c in nodes if c not in out.children_map]):
            serials[cid].add(finished)
        out.leaf_serials = {c: sorted(s) for c, s in sorted(serials.items())}
        return out
