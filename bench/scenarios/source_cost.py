"""``source-cost``: what each statement of three jobs would read on the real DWH.

The embedded database has the real tables, columns and indexes (``tests/test_dwh_schema.py``),
so SQLite's ``EXPLAIN QUERY PLAN`` of a statement is its access path there too: a full scan
here is a full scan there. This scenario runs the reads of three jobs through a recording
source on the sample database, exactly as their units and stages call it:

1. **the 114K trace**: ``fetch`` of history, materials, rejects and holds for the TMTT
   five-month trace CID set, one 1,000-CID unit at a time (``TRACE_CHUNK_CIDS``), and the jobs
   domain's one ``scan_jobs`` per job (its rows returned: the domain's rows, the jobs the
   scan read matched in Python to the job's CIDs);
2. **the MSD backward job**: the date-mode seeds (``seeds_by_dates``), their backward lineage,
   per 1,000-seed chunk the detection rows and the ``backward_rows`` of the chunk's lineage nodes;
3. **the MSD forward job**: the seeds of an upstream station (焊接_DB, the same window), their
   forward lineage, the detection of the seeds and ``downstream_rejects`` of the fetch set;
4. **the query-tool trees**: ``forward_tree`` and ``reverse_tree`` of the first
   :data:`TREE_SEEDS` forward seeds (one request each).

Each statement run is costed at the real row counts (``tests/data/dwh_schema.json``): a full
scan of a table (or of one of its indexes) costs the table's ``row_count``; an index search
costs the rows it matches, counted on the sample database (whose rows per container follow
the DWH's) for a CID or name key, scaled by the table's real/sample row ratio for a date
range, and for a join's probe at most one per row returned. The report gives each
statement's access path and, per job, rows read vs rows returned, with the issue's targets.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

from bench import trace_support as ts

NAME = "source-cost"
HELP = "each statement's access path on the embedded DWH and the rows it would read at the real row counts"
DEFAULT_REPEAT = 1
WINDOW = ("2025-01-01", "2025-05-31")
UPSTREAM = "焊接_DB"
CHUNK = 1000
TRACE_DOMAINS = ("history", "materials", "rejects", "holds", "jobs")
BIG = 1_000_000
TREE_SEEDS = 1000
SCHEMA = Path(__file__).resolve().parents[2] / "tests" / "data" / "dwh_schema.json"

_IN_COLUMN = re.compile(r"(\w+)\.(\w+) IN \(:p0\b")
_KEY = re.compile(r"\((\w+)=\?\)")
_RANGE = re.compile(r"\((\w+)>\? AND \1<\?\)")


class Recorder:
    """A SqliteSource that records every statement it runs: (sql, params, rows returned)."""

    def __init__(self, db: Path):
        from tracebus.trace.sources.sqlite import SqliteSource

        recorder = self

        class Recording(SqliteSource):
            def _execute(self, sql, params, batch_rows):
                entry = {"sql": sql, "params": dict(params), "returned": 0, "job": recorder.job,
                         "step": recorder.step}
                recorder.runs.append(entry)
                for rows in super()._execute(sql, params, batch_rows):
                    entry["returned"] += len(rows)
                    yield rows

        self.runs: list[dict] = []
        self.job = self.step = ""
        self.source = Recording(db)

    def at(self, job: str, step: str) -> "Recorder":
        self.job, self.step = job, step
        return self


def _drain(batches) -> list:
    return [row for _, rows in batches for row in rows]


def _chunks(values, size=CHUNK):
    return [values[i:i + size] for i in range(0, len(values), size)]


def run_jobs(db: Path, ctx) -> Recorder:
    from tracebus.trace.events import jobs_domain
    from tracebus.trace.msd.reads import MsdReads
    from tracebus.trace.sources.lineage import LineageReads
    from tracebus.trace.stages.seeds import SeedReads
    from tracebus.trace.stages.trees import TreeReads

    rec = Recorder(db)
    src = rec.source
    msd, seed_reads, lineage, trees = MsdReads(src), SeedReads(src), LineageReads(src), TreeReads(src)
    cids = ts.trace_cids(db)
    ctx.step(f"114K trace: {len(cids):,} CIDs, {len(TRACE_DOMAINS)} domains in {CHUNK}-CID units")
    for domain in TRACE_DOMAINS:
        rec.at("trace-114k", domain)
        if domain == "jobs":  # one read of DW_MES_JOB per job (tracebus/trace/events/jobs_domain.py)
            kept = len(_drain(jobs_domain.scan_jobs(src, cids, 5000)))
            rec.runs[-1]["statement_rows"], rec.runs[-1]["returned"] = rec.runs[-1]["returned"], kept
            continue
        for chunk in _chunks(cids):
            _drain(src.fetch(domain, chunk, 5000))
    rec.at("msd-backward", "seeds")
    seeds = [c for c, _ in seed_reads.seeds_by_dates("測試", *WINDOW)]
    rec.at("msd-backward", "lineage")
    back = lineage.lineage_backward(seeds)
    roots = back.seed_roots
    ordered = sorted(seeds, key=lambda s: (str(roots.get(s) or ""), s))
    ctx.step(f"MSD backward: {len(seeds):,} seeds, {len(back.fetch_cids()):,} CIDs with their ancestors")
    for chunk in _chunks(ordered):
        rec.at("msd-backward", "detection")
        _drain(msd.detect_by_cids("測試", chunk, 5000, *WINDOW))
        nodes = sorted(set(chunk) | {a for s in chunk for a in back.ancestors.get(s, ())})
        for domain in ("upstream_history", "materials"):
            rec.at("msd-backward", f"backward_rows.{domain}")
            _drain(msd.backward_rows(domain, nodes, 5000))
    rec.at("msd-forward", "seeds")
    fseeds = [c for c, _ in seed_reads.seeds_by_dates(UPSTREAM, *WINDOW)]
    rec.at("msd-forward", "lineage")
    fwd = lineage.lineage_forward(fseeds)
    fetch = list(dict.fromkeys(fseeds + sorted(c for kids in fwd.children_map.values() for c in kids)))
    ctx.step(f"MSD forward: {len(fseeds):,} seeds at {UPSTREAM}, {len(fetch):,} CIDs with their descendants")
    for chunk in _chunks(fseeds):
        rec.at("msd-forward", "detection")
        _drain(msd.detect_by_cids(UPSTREAM, chunk, 5000, *WINDOW))
    for chunk in _chunks(fetch):
        rec.at("msd-forward", "downstream_rejects")
        _drain(src.fetch("downstream_rejects", chunk, 5000))
    tree_seeds = fseeds[:TREE_SEEDS]
    ctx.step(f"query-tool trees: {len(tree_seeds):,} seeds")
    rec.at("query-tool", "forward_tree")
    trees.forward_tree(tree_seeds)
    rec.at("query-tool", "reverse_tree")
    trees.reverse_tree(tree_seeds)
    src.close()
    return rec


class Coster:
    """Rows a statement run reads at the real row counts, from its SQLite plan."""

    def __init__(self, db: Path, real: dict):
        from tracebus.trace.sources.plans import sqlite_plan

        self.conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        self.real = {t: info["row_count"] for t, info in real.items()}
        self.sample = {t: self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in self.real
                       if self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()}
        self.plan = sqlite_plan
        self.plans: dict[str, object] = {}
        self.lines: dict[str, list[str]] = {}

    def _plan(self, sql, params):
        shape = re.sub(r":p\d+(?:, :p\d+)*", ":p*", sql)
        if shape not in self.plans:
            self.plans[shape] = self.plan(self.conn, sql, params)
            self.lines[shape] = self.conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
        return shape, self.plans[shape]

    def _count(self, sql, args) -> int:
        return self.conn.execute(sql, args).fetchone()[0]

    def _keys(self, sql, params) -> tuple[str | None, list[str]]:
        values = [v for k, v in params.items() if re.fullmatch(r"p\d+", k)]
        m = _IN_COLUMN.search(sql)
        return (m.group(2) if m else None), values

    def cost(self, run: dict) -> dict:
        sql, params = run["sql"], run["params"]
        shape, plan = self._plan(sql, params)
        reads: list[tuple[str, str, int]] = []
        for table in plan.full_scans:
            reads.append((table, "full scan", self.real[table]))
        in_col, values = self._keys(sql, params)
        for _, _, _, detail in self.lines[shape]:
            if not detail.startswith("SEARCH "):
                continue
            index = re.search(r"USING (?:COVERING )?INDEX (\w+)", detail)
            if not index:
                continue
            table = self.conn.execute("SELECT tbl_name FROM sqlite_master WHERE name = ?",
                                      (index.group(1),)).fetchone()[0]
            reads.append((table, index.group(1), self._search_rows(table, detail, in_col, values, params,
                                                                   run["returned"])))
        return {"shape": shape, "reads": reads, "read": sum(r[2] for r in reads)}

    def _search_rows(self, table, detail, in_col, values, params, returned) -> int:
        rng = _RANGE.search(detail)
        if rng:
            col = rng.group(1)
            t0, t1 = params.get("t0"), params.get("t1")
            n = self._count(f"SELECT COUNT(*) FROM {table} WHERE {col} >= ? AND {col} < ?", (t0, t1))
            return round(n * self.real[table] / max(1, self.sample[table]))
        key = _KEY.search(detail)
        col = key.group(1) if key else None
        if not values or col is None:
            return returned  # a probe per row returned, at most
        marks = ", ".join("?" * len(values))
        if in_col in ("CONTAINERID", "LOTID") or (table == "DW_MES_CONTAINER" and col == in_col):
            cids_sql, args = f"({marks})", values
        else:  # the IN list names containers: their CIDs
            cids_sql, args = f"(SELECT CONTAINERID FROM DW_MES_CONTAINER WHERE {in_col} IN ({marks}))", values
        if table == "DW_MES_CONTAINER" and col == in_col:
            n = self._count(f"SELECT COUNT(*) FROM {table} WHERE {col} IN ({marks})", values)
        elif col == "CONTAINERNAME":  # DW_MES_WIP by its lots' names
            n = self._count(f"SELECT COUNT(*) FROM {table} WHERE CONTAINERNAME IN (SELECT CONTAINERNAME FROM "
                            f"DW_MES_CONTAINER WHERE CONTAINERID IN {cids_sql})", args)
        else:
            n = self._count(f"SELECT COUNT(*) FROM {table} WHERE {col} IN {cids_sql}", args)
        if "LEFT-JOIN" in detail or (table == "DW_MES_CONTAINER" and col != in_col):
            n = min(n, returned)  # a join's probe: at most one per row returned
        return n


def run(args, ctx) -> dict:
    real = json.loads(SCHEMA.read_text(encoding="utf-8"))
    db = ts.sample_db(args.scale, ctx.step)
    rec = run_jobs(db, ctx)
    ctx.step(f"{len(rec.runs):,} statements run; costing them at the real row counts")
    coster = Coster(db, real)
    per_job: dict[str, dict] = defaultdict(lambda: {"statements": 0, "read": 0, "returned": 0,
                                                    "big_scans": defaultdict(int), "steps": defaultdict(
                                                        lambda: {"statements": 0, "read": 0, "returned": 0,
                                                                 "scans": defaultdict(int)})})
    shapes: dict[str, dict] = {}
    for r in rec.runs:
        c = coster.cost(r)
        job, step = per_job[r["job"]], per_job[r["job"]]["steps"][r["step"]]
        for agg in (job, step):
            agg["statements"] += 1
            agg["read"] += c["read"]
            agg["returned"] += r["returned"]
        for table, how, _ in c["reads"]:
            if how == "full scan":
                step["scans"][table] += 1
                if coster.real[table] > BIG:
                    job["big_scans"][table] += 1
        shapes.setdefault(c["shape"], {"jobs": set(), "plan": coster.plans[c["shape"]]})["jobs"].add(
            f"{r['job']}/{r['step']}")
    scanned = sum(r.get("statement_rows", 0) for r in rec.runs)
    return _report(args, coster, per_job, shapes, scanned)


def _fmt(n: int) -> str:
    return f"{n:,}"


def _report(args, coster, per_job, shapes, scanned: int) -> dict:
    targets = []
    trace = per_job["trace-114k"]["steps"]
    for domain in TRACE_DOMAINS:
        s = trace[domain]
        ratio = s["read"] / max(1, s["returned"])
        targets.append({"name": f"114K trace, {domain}: predicted rows read vs rows returned",
                        "target": "<= 2x", "measured": f"{ratio:.2f}x ({_fmt(s['read'])} vs {_fmt(s['returned'])})",
                        "met": ratio <= 2})
    down = per_job["msd-forward"]["steps"]["downstream_rejects"]
    ratio = down["read"] / max(1, down["returned"])
    targets.append({"name": "MSD forward, downstream_rejects: predicted rows read vs rows returned",
                    "target": "<= 2x", "measured": f"{ratio:.2f}x", "met": ratio <= 2})
    for job in ("trace-114k", "msd-backward", "msd-forward"):
        scans = per_job[job]["big_scans"]
        total = sum(scans.values())
        where = ", ".join(f"{t} x{n}" for t, n in sorted(scans.items())) or "none"
        targets.append({"name": f"{job}: full scans of tables over 1M rows", "target": "<= 1 per job",
                        "measured": f"{total} ({where})", "met": total <= 1})
    fscans = per_job["msd-forward"]["steps"]["lineage"]["scans"].get("DW_MES_CONTAINER", 0)
    targets.append({"name": "descending lineage walk: full scans of DW_MES_CONTAINER per request",
                    "target": "<= 1", "measured": str(fscans), "met": fscans <= 1})
    tscans = per_job["query-tool"]["steps"]["forward_tree"]["scans"].get("DW_MES_CONTAINER", 0)
    targets.append({"name": f"query-tool forward tree ({TREE_SEEDS:,} seeds): full scans of DW_MES_CONTAINER "
                            "per request", "target": "<= 1", "measured": str(tscans), "met": tscans <= 1})
    bscans = dict(per_job["msd-backward"]["steps"]["lineage"]["scans"])
    targets.append({"name": "ascending lineage walk: full scans", "target": "0 (index only)",
                    "measured": ", ".join(f"{t} x{n}" for t, n in sorted(bscans.items())) or "0",
                    "met": not bscans})
    job_rows = []
    for job, agg in per_job.items():
        for step, s in agg["steps"].items():
            scans = ", ".join(f"{t} x{n}" for t, n in sorted(s["scans"].items())) or "-"
            job_rows.append([job, step, _fmt(s["statements"]), _fmt(s["read"]), _fmt(s["returned"]),
                             f"{s['read'] / max(1, s['returned']):.2f}", scans])
    path_rows = []
    for shape, info in shapes.items():
        plan = info["plan"]
        path_rows.append([", ".join(sorted(info["jobs"])), ", ".join(plan.full_scans) or "-",
                          ", ".join(sorted({f"{t}.{i}" for t, i in plan.index_reads})) or "-"])
    met = sum(1 for t in targets if t["met"])
    return {
        "summary": (f"Scale {args.scale:g} sample database, costed at the real DWH's row counts. "
                    f"{met} of {len(targets)} targets met."),
        "targets": targets,
        "tables": [
            {"title": "rows read per job step at the real row counts",
             "columns": ["job", "step", "statements", "rows read", "rows returned", "read/returned",
                         "full scans"], "rows": job_rows},
            {"title": "access path of each statement (SQLite EXPLAIN QUERY PLAN, real indexes)",
             "columns": ["used by", "full scans", "index searches"], "rows": path_rows},
        ],
        "notes": [
            "A full scan costs the table's real row_count (DW_MES_CONTAINER 5,313,094; DW_MES_JOB 1,273,902; "
            "DW_MES_PJ_COMBINEDASSYLOTS 1,994,711; DW_MES_WIP 84,271,674); an index search the rows it "
            "matches on the sample database (CID and name keys) or its date range scaled to the real table.",
            f"The 114K trace's jobs domain is one read of DW_MES_JOB per job: its statement returns the "
            f"{_fmt(scanned)} jobs of the sample that list CIDs, matched in Python against the job's CIDs "
            "(rows returned above: the domain's rows). A full scan costs 1,273,902 rows whatever it keeps.",
            "What the original does: the jobs domain ORs 1,000 LIKE '%cid%' against DW_MES_JOB per "
            "1,000 CIDs (a full scan each); its merge_sources.sql filters DW_MES_PJ_COMBINEDASSYLOTS on "
            "LOTID (no index: a full scan per IN list; tracebus's ascending walk reads the merge sources of all "
            "its levels in one statement per request, docs/sources.md D18); split_descendants.sql is one CONNECT BY per IN "
            "list of roots (one full scan of DW_MES_CONTAINER each, no SPLITFROMID index).",
        ],
        "data": {"jobs": {j: {k: v for k, v in a.items() if k != "steps"} | {"steps": a["steps"]}
                          for j, a in per_job.items()},
                 "plans": {s: {"full_scans": i["plan"].full_scans, "index_reads": i["plan"].index_reads,
                               "lines": i["plan"].lines, "used_by": sorted(i["jobs"])}
                           for s, i in shapes.items()}},
    }
