"""The query-tool page's lineage trees, as the original's ``LineageEngine`` builds them.

:class:`TreeReads` runs on any source (:class:`~tracebus.trace.sources.reads.Reader`); only the
stage kind's lineage stage reads them, so they are in its folder. Its two answers are those of the
original's ``trace_lineage_job_service``: profile ``query_tool`` gets
``resolve_forward_tree`` (:meth:`TreeReads.forward_tree`), profile ``query_tool_reverse``
``resolve_full_genealogy`` through ``_build_backward_response``
(:meth:`TreeReads.reverse_tree`); the front end reads them in useLotLineage.ts and
useReverseLineage.ts. Unlike the MSD lineage of :mod:`tracebus.trace.sources.lineage` (every link
at every level), these follow the original's rules step by step:

* splits up from the seeds and down from their roots, as ``sql/lineage/split_ancestors.sql``
  and ``split_descendants.sql`` (``CONNECT BY NOCYCLE ... LEVEL <= 20``): up one level per
  IN list at a time, down from the edges one statement per request reads
  (:meth:`TreeReads._split_edges`), with the same rows;
* merges (``merge_sources.sql``, by the target's LOTID) one hop only: in the forward tree as
  ``edges`` only, not in ``children_map``; in the reverse one in ``parent_map``, with the
  sources' own split ancestors;
* wafer origin (a FIRSTNAME that names a LOT) and GD rework (ORIGINALCONTAINERID, else
  SPLITFROMID, of a GD lot) links of every node, into ``children_map`` / ``parent_map``;
* ``leaf_serials``: the FINISHEDNAMEs of the split tree's leaves (``leaf_serial_numbers.sql``).

Where the original's order comes from the database (children, the first LOT of a duplicated
name) these are sorted by CID; where it picks an arbitrary parentless ancestor as a seed's
root, this takes the one with the smallest name, then CID.
"""

from __future__ import annotations

from typing import Iterable

from tracebus.trace.sources import lineage_sql
from tracebus.trace.sources.batching import unique_cids, walk_groups
from tracebus.trace.sources.genealogy import GD_REWORK, MERGE, SPLIT, WAFER, is_gd, node_type
from tracebus.trace.sources.lineage import LineageReads

#: The original's ``MAX_SPLIT_DEPTH`` (and ``LEVEL <= 20``).
MAX_DEPTH = 20
#: Stack pops of the original's ancestor walk over ``parent_map`` (``MAX_SPLIT_DEPTH * 10``).
MAX_WALK = MAX_DEPTH * 10
_ID = lineage_sql.SNAPSHOT_COLUMNS.index
_NAME, _ORDER, _FIRST, _ORIG, _SPLIT = (_ID(c) for c in ("CONTAINERNAME", "MFGORDERNAME", "FIRSTNAME",
                                                          "ORIGINALCONTAINERID", "SPLITFROMID"))


def _text(value) -> str | None:
    """The original's ``_safe_str``: a stripped non-empty string, else None."""
    if not isinstance(value, str):
        return None
    return value.strip() or None


class _UniqueLists(dict):
    """key -> its distinct items in the order first added; :meth:`add` is O(1) (a lot with
    30,000 split children was 8.9 s of membership tests in a list)."""

    def __init__(self, lists: Iterable[tuple[str, Iterable[str]]] = ()):
        super().__init__()
        self._pairs: set[tuple[str, str]] = set()
        for key, items in lists:
            for item in items:
                self.add(key, item)

    def add(self, key: str, item: str) -> None:
        if item and (key, item) not in self._pairs:
            self._pairs.add((key, item))
            self.setdefault(key, []).append(item)

    def holds(self, key: str, item: str) -> bool:
        return (key, item) in self._pairs

    def plain(self) -> dict[str, list[str]]:
        return dict(self)


def _edge_payload(edges: Iterable[tuple[str, str, str]]) -> list[dict]:
    out, seen = [], set()
    for edge in edges:
        if all(edge) and edge not in seen:
            seen.add(edge)
            out.append({"from_cid": edge[0], "to_cid": edge[1], "edge_type": edge[2]})
    return out


def parent_maps(child_to_parent: dict, merge_child_to_parent: dict, merge_sources: dict) -> tuple[dict, dict]:
    """The original's ``_build_parent_map``: ``(parent_map, merge_edges)``."""
    parent_map = _UniqueLists((child, [parent]) for child, parent in child_to_parent.items())
    merge_edges: dict[str, list[str]] = {}
    for child, parent in merge_child_to_parent.items():
        parent_map.add(child, parent)
    for child, sources in merge_sources.items():
        for source in sources:
            if source and source != child and not parent_map.holds(child, source):
                parent_map.add(child, source)
                merge_edges.setdefault(child, []).append(source)
    return parent_map, merge_edges


def walk_up(start: list[str], parent_map: dict) -> set[str]:
    """Every parent reachable from ``start`` (a seed's direct parents), as the original's stack
    walk: at most :data:`MAX_WALK` pops, so a very wide genealogy is cut where it cuts it."""
    visited: set[str] = set()
    stack, pops = list(start), 0
    while stack and pops < MAX_WALK:
        pops += 1
        parent = stack.pop()
        if parent in visited:
            continue
        visited.add(parent)
        stack.extend(gp for gp in parent_map.get(parent, ()) if gp not in visited)
    return visited


def _split_chain(cid: str, child_to_parent: dict[str, str], into: set[str]) -> set[str]:
    """Add to ``into`` the split ancestors of ``cid``, up its chain of SPLITFROMIDs for at most
    :data:`MAX_DEPTH` levels, stopping at a parent ``into`` already holds; returns ``into``."""
    current, depth = cid, 0
    while current in child_to_parent and depth < MAX_DEPTH:
        depth += 1
        parent = child_to_parent[current]
        if parent in into:
            break
        into.add(parent)
        current = parent
    return into


def _add_merge_sources(seeds: list[str], ancestors: dict[str, set[str]], merge_sources: dict) -> set[str]:
    """Add to each seed's ancestors the merge sources of the seed and of its split ancestors (one
    hop: a source's own sources are not followed); returns every source added."""
    added: set[str] = set()
    for seed in seeds:
        own = ancestors[seed] | {seed}
        for cid in own:
            for source in merge_sources.get(cid, ()):
                if source != cid and source not in own:
                    ancestors[seed].add(source)
                    added.add(source)
    return added


def _seed_walks(seeds: list[str], parent_map: dict, names: dict) -> tuple[dict[str, list[str]], dict[str, str]]:
    """``(walked, seed_roots)``: per seed, the parents :func:`walk_up` reaches (sorted), and the name
    of its root (of its top ancestors, else of any it reached, the smallest name; else the seed's)."""
    walked: dict[str, list[str]] = {}
    seed_roots: dict[str, str] = {}
    for seed in seeds:
        visited = walk_up(parent_map.get(seed, []), parent_map)
        walked[seed] = sorted(visited)
        tops = [c for c in visited if not parent_map.get(c)] or list(visited)
        root = min(tops, key=lambda c: (names.get(c, c), c)) if tops else seed
        seed_roots[seed] = names.get(root, root)
    return walked, seed_roots


class TreeReads(LineageReads):
    """The query-tool lineage trees over a source: ``TreeReads(source).forward_tree(seeds)`` (it
    reads through :meth:`~tracebus.trace.sources.lineage.LineageReads._each`, one statement per IN list)."""

    def _snaps(self, cids: Iterable[str]) -> dict[str, tuple]:
        """Container snapshots (strings stripped, empty ones None) by CID, in CID order."""
        rows = {}
        for row in self._each(lineage_sql.snapshot, sorted(set(cids))):
            cid = _text(row[0])
            if cid:
                rows[cid] = tuple(_text(v) if isinstance(v, str) else v for v in row)
        return dict(sorted(rows.items()))

    def _split_up(self, cids: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """``(child_to_parent, names)`` of split_ancestors.sql from ``cids``, ``LEVEL <= 20``."""
        child_to_parent: dict[str, str] = {}
        names: dict[str, str] = {}
        frontier, seen = list(cids), set(cids)
        for _ in range(MAX_DEPTH):
            if not frontier:
                break
            snaps, nxt = self._snaps(frontier), []
            for cid, snap in snaps.items():
                if snap[_NAME]:
                    names[cid] = snap[_NAME]
                parent = snap[_SPLIT]
                if parent and parent != cid:
                    child_to_parent.setdefault(cid, parent)
                    if parent not in seen:
                        seen.add(parent)
                        nxt.append(parent)
            frontier = nxt
        return child_to_parent, names

    def _split_edges(self, parents: list[str], depth: int) -> dict[str, list[tuple]]:
        """parent -> [(parent, child, child name)] (stripped) of the split edges below
        ``parents``, read by one statement per request (:func:`~tracebus.trace.sources.lineage_sql.split_descendants`:
        per ``max_binds`` parents in Oracle, one in SQLite), not one full scan of
        DW_MES_CONTAINER per IN list per level; the caller walks them level by level."""
        out: dict[str, list[tuple]] = {}
        if not parents:
            return out
        seen = set()
        for group in walk_groups(self.dialect, parents):
            sql = lineage_sql.split_descendants(self.dialect, len(group), depth)
            for row in self._rows(sql, {f"p{i}": c for i, c in enumerate(group)}):
                edge = tuple(_text(v) for v in row)
                if edge[0] and (row[0], edge) not in seen:  # keyed as stored: the IN list matched it so
                    seen.add((row[0], edge))
                    out.setdefault(row[0], []).append(edge)
        return out

    def _split_down(self, roots: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
        """``(children_map, names)`` of split_descendants.sql from ``roots``, ``LEVEL <= 20``:
        the roots' own rows are level 1 (a root that has a SPLITFROMID, cut by the depth
        limit on the way up, becomes its parent's child, as there)."""
        children = _UniqueLists()
        names: dict[str, str] = {}
        rows = self._snaps(roots)
        for cid, snap in rows.items():
            if snap[_NAME]:
                names[cid] = snap[_NAME]
            if snap[_SPLIT] and snap[_SPLIT] != cid:
                children.add(snap[_SPLIT], cid)
        frontier, seen = list(rows), set(rows)
        below = self._split_edges(frontier, MAX_DEPTH - 1)
        for _ in range(MAX_DEPTH - 1):
            if not frontier:
                break
            nxt = []
            found = sorted(edge for p in frontier for edge in below.get(p, ()))
            for parent, child, name in found:
                if not child or child in seen:
                    continue
                seen.add(child)
                nxt.append(child)
                if name:
                    names[child] = name
                if parent and parent != child:
                    children.add(parent, child)
            frontier = nxt
        return children.plain(), names

    def _merge_sources(self, targets: Iterable[str]) -> dict[str, list[str]]:
        """merge_sources.sql: target CID -> its sorted source CIDs (never itself), targets sorted.
        LOTID has no index: one statement per ``max_binds`` targets
        (:func:`~tracebus.trace.sources.lineage_sql.merge_sources_wide`), not one full scan of
        DW_MES_PJ_COMBINEDASSYLOTS per IN list of 1,000 as the original."""
        out: dict[str, set[str]] = {}
        for target, source, _ in self._each(lineage_sql.merge_sources_wide, sorted(set(targets)), wide=True):
            target, source = _text(target), _text(source)
            if target and source and source != target:
                out.setdefault(target, set()).add(source)
        return {t: sorted(s) for t, s in sorted(out.items())}

    def _leaf_serials(self, cids: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, set[str]] = {}
        for cid, finished in self._each(lineage_sql.leaf_serials, sorted(set(cids))):
            cid, finished = _text(cid), _text(finished)
            if cid and finished:
                out.setdefault(cid, set()).add(finished)
        return {c: sorted(s) for c, s in sorted(out.items())}

    def _semantic(self, nodes: Iterable[str], names: dict) -> tuple[dict[str, tuple], list[tuple[str, str, str]],
                                                                     set[str]]:
        """The original's ``_build_semantic_links`` over the snapshots of ``nodes``: ``(those
        snapshots with the wafers and GD sources added, wafer-origin and GD-rework edges, wafer
        CIDs)``; the container name of each snapshot is recorded in ``names``."""
        snaps = self._snaps(nodes)
        wafer_by_name: dict[str, str] = {}
        first_names = sorted({s[_FIRST] for s in snaps.values() if s[_FIRST]})
        for cid, name in self._each(lineage_sql.ids_by_name, first_names):
            cid, name = _text(cid), _text(name)
            if cid and name and (name not in wafer_by_name or cid < wafer_by_name[name]):
                wafer_by_name[name] = cid
        extra = {cid for cid in wafer_by_name.values() if cid not in snaps}
        for snap in snaps.values():
            source = snap[_ORIG] or snap[_SPLIT]
            if is_gd(snap) and source and source not in snaps:
                extra.add(source)
        every = {**snaps, **self._snaps(extra)} if extra else dict(snaps)
        edges, wafer_ids = [], set()
        for cid, snap in every.items():
            wafer = wafer_by_name.get(snap[_FIRST] or "")
            if wafer and wafer != cid:
                edges.append((wafer, cid, WAFER))
                wafer_ids.add(wafer)
            source = snap[_ORIG] or snap[_SPLIT]
            if is_gd(snap) and source and source != cid:
                edges.append((source, cid, GD_REWORK))
        self._names_of(every, names)
        return every, edges, wafer_ids

    @staticmethod
    def _nodes(node_ids: set[str], snaps: dict, names: dict, wafer_ids: set[str]) -> dict[str, dict]:
        """The original's ``_build_nodes_payload``."""
        out = {}
        for cid in sorted(node_ids):
            snap = snaps.get(cid)
            out[cid] = {"container_id": cid,
                        "container_name": (snap[_NAME] if snap else None) or names.get(cid) or cid,
                        "mfgorder_name": snap[_ORDER] if snap else None,
                        "wafer_lot": snap[_FIRST] if snap else None,
                        "node_type": node_type(cid, snap, wafer_ids)}
        return out

    def _names_of(self, snaps: dict, names: dict) -> None:
        for cid, snap in snaps.items():
            if snap[_NAME]:
                names[cid] = snap[_NAME]

    def forward_tree(self, seed_cids: Iterable[str]) -> dict:
        """The ``query_tool`` answer (``resolve_forward_tree`` + ``_build_forward_response``):
        up from the seeds to their split roots, down from the roots, leaf serials, merges
        as edges, wafer and GD links into ``children_map``.

        Returns:
            ``{roots, children_map, leaf_serials, names, total_nodes, nodes, edges}``.

        Raises:
            InvalidParams: bad CIDs. SourceError: the database fails.
        """
        seeds = unique_cids(seed_cids)
        child_to_parent, names = self._split_up(seeds)
        tops = set()
        for seed in seeds:
            current, depth = seed, 0
            while current in child_to_parent and depth < MAX_DEPTH:
                depth += 1
                current = child_to_parent[current]
            tops.add(current)
        roots = sorted(tops)
        split_children, down_names = self._split_down(roots)
        names.update(down_names)
        children_map = _UniqueLists(split_children.items())
        split_edges = [(p, c, SPLIT) for p, cs in split_children.items() for c in cs]
        split_pairs = {(p, c) for p, c, _ in split_edges}
        nodes = set(roots) | set(children_map) | {c for cs in children_map.values() for c in cs}
        leaf_serials = self._leaf_serials(c for c in nodes if c not in children_map)
        merge_edges = []
        for target, sources in self._merge_sources(nodes).items():
            for source in sources:
                if (source, target) not in split_pairs:
                    merge_edges.append((source, target, MERGE))
                    nodes.update((source, target))
        snaps, semantic, wafer_ids = self._semantic(nodes, names)
        for parent, child, _ in semantic:
            children_map.add(parent, child)
            nodes.update((parent, child))
        incoming = {c for cs in children_map.values() for c in cs}
        nodes.update(children_map)
        nodes.update(incoming)
        return {"roots": sorted(nodes - incoming), "children_map": children_map.plain(),
                "leaf_serials": leaf_serials,
                "names": {c: n for c, n in names.items() if n}, "total_nodes": len(nodes),
                "nodes": self._nodes(nodes, snaps, names, wafer_ids),
                "edges": _edge_payload(split_edges + merge_edges + semantic)}

    def reverse_tree(self, seed_cids: Iterable[str]) -> dict:
        """The ``query_tool_reverse`` answer (``resolve_full_genealogy`` +
        ``_build_backward_response``): split ancestors, one hop of merge sources (with their
        own split ancestors), wafer and GD parents.

        Returns:
            ``{roots (the seeds), ancestors, merges, total_nodes, total_ancestor_count,
            parent_map, merge_edges, nodes, edges, names, seed_roots}``.

        Raises:
            InvalidParams: bad CIDs. SourceError: the database fails.
        """
        seeds = unique_cids(seed_cids)
        child_to_parent, names = self._split_up(seeds)
        ancestors = {seed: _split_chain(seed, child_to_parent, set()) for seed in seeds}
        split_edges = [(p, c, SPLIT) for c, p in child_to_parent.items()]
        known = set(seeds) | set(child_to_parent) | set(child_to_parent.values())
        merge_sources = self._merge_sources(known)
        merge_child_to_parent: dict[str, str] = {}
        if merge_sources:
            sources_all = _add_merge_sources(seeds, ancestors, merge_sources)
            new = sorted(sources_all - known)
            if new:
                merge_child_to_parent, merge_names = self._split_up(new)
                names.update(merge_names)
                for seed in seeds:  # the merge sources' own split ancestors
                    for cid in sorted(ancestors[seed] & sources_all):
                        _split_chain(cid, merge_child_to_parent, ancestors[seed])
        parent_map, merge_edges = parent_maps(child_to_parent, merge_child_to_parent, merge_sources)
        split_edges += [(p, c, SPLIT) for c, p in merge_child_to_parent.items()]
        merge_payload = [(s, c, MERGE) for c, sources in merge_edges.items() for s in sources]
        nodes = set(seeds).union(*ancestors.values()) | set(parent_map)
        nodes.update(p for ps in parent_map.values() for p in ps)
        snaps, semantic, wafer_ids = self._semantic(nodes, names)
        for parent, child, _ in semantic:
            parent_map.add(child, parent)
            nodes.update((parent, child))
        walked, seed_roots = _seed_walks(seeds, parent_map, names)
        shown = set(seeds).union(*map(set, walked.values()))
        answer = {"roots": list(seeds), "ancestors": walked, "merges": {}, "total_nodes": len(shown),
                  "total_ancestor_count": len(shown - set(seeds)), "parent_map": parent_map.plain(),
                  "merge_edges": merge_edges, "nodes": self._nodes(nodes, snaps, names, wafer_ids),
                  "edges": _edge_payload(split_edges + merge_payload + semantic),
                  "names": {c: n for c, n in names.items() if c in shown and n}}
        if seed_roots:
            answer["seed_roots"] = seed_roots
        return answer
