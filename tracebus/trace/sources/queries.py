"""The per-domain SELECT statements, written once for the SQLite, Oracle and PostgreSQL sources.

Each statement selects exactly the columns of :data:`tracebus.trace.domains.COLUMNS`, in
order, from the tables of DOMAIN.md section 1, for one IN list of bind variables
``:p0 .. :pN``. What differs between the dialects (table names, date formatting, "now",
the jobs substring predicate) is isolated in a :class:`Dialect`. Every dialect returns
dates as ISO text so the sources produce identical rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from tracebus.trace.domains import NA, NO_SEQUENCE, UNFILLED_REASON, WORKCENTER_GROUPS, WorkcenterGroup, columns


#: The DWH tables the sources read, by their real names (DOMAIN.md section 6): the
#: embedded database has them under these names, Oracle in the schema ``DWH``.
TABLES = ("DW_MES_CONTAINER", "DW_MES_LOTWIPHISTORY", "DW_MES_LOTMATERIALSHISTORY",
          "DW_MES_LOTREJECTHISTORY", "DW_MES_HOLDRELEASEHISTORY", "DW_MES_JOB",
          "DW_MES_SPEC_WORKCENTER_V", "DW_MES_PJ_COMBINEDASSYLOTS", "DW_MES_WIP",
          "DW_MES_RESOURCE", "DW_MES_RESOURCESTATUS_SHIFT")


@dataclass(frozen=True)
class Dialect:
    """What one SQL dialect spells differently."""

    name: str
    tables: Mapping[str, str]  # real table name -> how the dialect names it
    ts: Callable[[str], str]  # DATE expression -> 'YYYY-MM-DD HH:MM:SS' text
    day: Callable[[str], str]  # DATE expression -> 'YYYY-MM-DD' text
    hours_to_now: Callable[[str, str], str]  # (end or NULL, start) -> hours, NULL end = now
    contains_any: Callable[[str, list[str]], str]  # (text, binds) -> "text contains a bind"
    date_bind: Callable[[str], str] = lambda b: b  # ':bind' holding ISO text -> DATE expression
    #: TRIM(text) as Oracle gives it: NULL for an all-blank text (Oracle's '' is NULL).
    trim: Callable[[str], str] = lambda e: f"NULLIF(TRIM({e}), '')"
    #: Bind variables one statement may carry (Oracle: 65,535; SQLite's portable default 32,766).
    max_binds: int = 32000
    #: (text, needle) -> the 1-based position of needle in text, 0 when absent.
    instr: Callable[[str, str], str] = lambda e, sub: f"INSTR({e}, {sub})"
    #: ROUND(number, places) as a float (PostgreSQL's ROUND of a numeric stays numeric).
    round: Callable[[str, int], str] = lambda e, places: f"ROUND({e}, {places})"


SQLITE = Dialect(
    name="sqlite",
    tables={t: t for t in TABLES},
    ts=lambda e: e,
    day=lambda e: f"substr({e}, 1, 10)",
    # Whole seconds, as Oracle's DATE arithmetic; julianday() fractions would round differently.
    hours_to_now=lambda end, start: (
        f"(CAST(strftime('%s', COALESCE({end}, datetime('now', 'localtime'))) AS INTEGER) "
        f"- CAST(strftime('%s', {start}) AS INTEGER)) / 3600.0"),
    # SQLite has no cheap "contains one of 1000 strings" predicate (1000 ORs exceed its
    # expression depth, a VALUES join costs seconds per batch): it reads every job that lists
    # CIDs (a small table) and the shared matcher in base.py keeps the matching ones.
    contains_any=lambda e, binds: "1 = 1",
)

ORACLE = Dialect(
    name="oracle",
    tables={t: f"DWH.{t}" for t in TABLES},
    ts=lambda e: f"TO_CHAR({e}, 'YYYY-MM-DD HH24:MI:SS')",
    day=lambda e: f"TO_CHAR({e}, 'YYYY-MM-DD')",
    hours_to_now=lambda end, start: f"(NVL({end}, SYSDATE) - {start}) * 24",
    # INSTR rather than the original LIKE '%cid%': a '%' or '_' in a CID is not a wildcard.
    contains_any=lambda e, binds: "(" + " OR ".join(f"INSTR({e}, {b}) > 0" for b in binds) + ")",
    date_bind=lambda b: f"TO_DATE({b}, 'YYYY-MM-DD HH24:MI:SS')",
    trim=lambda e: f"TRIM({e})",
    max_binds=65000,
)

# PostgreSQL (the sample as ``tracebus sample-data --to`` writes it, or a warehouse there): the
# tables unqualified (the DSN's database and search_path name the schema), DATEs as
# ``timestamp(0)``. Its IN lists take the binds of one statement (65,535) in one list, as
# SQLite's; like SQLite it returns every edge of the lineage walks, which the caller walks
# (no CONNECT BY; a recursive CTE probing the unindexed LOTID/SPLITFROMID reads the table per
# level).
POSTGRES = Dialect(
    name="postgres",
    tables={t: t for t in TABLES},
    ts=lambda e: f"TO_CHAR({e}, 'YYYY-MM-DD HH24:MI:SS')",
    day=lambda e: f"TO_CHAR({e}, 'YYYY-MM-DD')",
    # Whole seconds, as Oracle's DATE arithmetic; LOCALTIMESTAMP is the session's time zone.
    hours_to_now=lambda end, start: (
        f"(EXTRACT(EPOCH FROM COALESCE({end}, LOCALTIMESTAMP(0))) - EXTRACT(EPOCH FROM {start})) / 3600.0"),
    # As SQLite: every job that lists CIDs, the shared matcher in base.py keeps the matching
    # ones (1,000 STRPOS per row cost the server more than sending it the table's rows).
    contains_any=lambda e, binds: "1 = 1",
    date_bind=lambda b: f"CAST({b} AS timestamp)",
    max_binds=65000,
    instr=lambda e, sub: f"STRPOS({e}, {sub})",
    round=lambda e, places: f"CAST(ROUND({e}, {places}) AS double precision)",
)

#: The dialects by name (``tracebus sql --dialect``).
DIALECTS = {d.name: d for d in (SQLITE, ORACLE, POSTGRES)}


def literal(text: str) -> str:
    if "'" in text:
        raise ValueError(f"quote in SQL literal {text!r}")
    return f"'{text}'"


def in_group(d: Dialect, group: WorkcenterGroup, expr: str, term: Callable[[str], str] = literal) -> str:
    """SQL condition "``expr`` names a workcenter of ``group``" (DOMAIN.md section 5): a
    case-insensitive substring test of any of its keywords and none of its exclusions.
    ``term`` writes one upper-cased keyword as SQL: a literal (the default), or a bind variable
    (:func:`station_filter`). INSTR/STRPOS, not LIKE: the ``_`` of '焊接_DB' is a
    plain character, not a wildcard."""
    def any_of(words) -> str:
        return " OR ".join(f"{d.instr(f'UPPER({expr})', term(w.upper()))} > 0" for w in words)

    cond = f"({any_of(group.keywords)})"
    if group.excludes:
        cond += f" AND NOT ({any_of(group.excludes)})"
    return cond


def station_filter(d: Dialect, groups: list[WorkcenterGroup], column: str) -> tuple[str, dict[str, str]]:
    """SQL predicate "``column`` belongs to one of ``groups``" and its ``:k`` binds.

    The test of :func:`in_group` (the group CASE's), with the keywords bound: the MSD page's
    detection and seed statements. The original uses ``LIKE '%pattern%'``, where the ``_`` of
    '焊接_DB' is a wildcard; INSTR keeps it a plain character.
    """
    params: dict[str, str] = {}

    def bind(word: str) -> str:
        name = f"k{len(params)}"
        params[name] = word
        return ":" + name

    return "(" + " OR ".join(f"({in_group(d, group, column, bind)})" for group in groups) + ")", params


def group_case(d: Dialect, expr: str) -> str:
    """SQL CASE giving the workcenter group of ``expr`` (DOMAIN.md section 5), NULL when none."""
    whens = [f"WHEN {in_group(d, group, expr)} THEN {literal(group.name)}" for group in WORKCENTER_GROUPS]
    return "CASE " + " ".join(whens) + " END"


def in_any(d: Dialect, column: str, n: int, prefix: str = "p") -> str:
    """``column`` is one of ``:p0 .. :p{n-1}``: in Oracle IN lists of at most 1,000 (its limit)
    OR-ed, in SQLite and PostgreSQL one IN list (OR-ed lists cost SQLite a test of each list per row)."""
    size = 1000 if d.name == "oracle" else max(n, 1)
    lists = [f"{column} IN ({', '.join(f':{prefix}{i}' for i in range(k, min(n, k + size)))})"
             for k in range(0, n, size)]
    return lists[0] if len(lists) == 1 else "(" + " OR ".join(lists) + ")"


def in_binds(prefix: str, n: int) -> str:
    """``:prefix0, :prefix1, ...`` for an IN list of ``n`` bind variables."""
    return ", ".join(f":{prefix}{i}" for i in range(n))


def _na(d: Dialect, *exprs: str, default: str = NA) -> str:
    """The first of ``exprs`` that is not blank once trimmed (TRIMmed), else ``default``:
    the original's ``NVL(TRIM(a), NVL(TRIM(b), '(NA)'))``."""
    return f"COALESCE({', '.join(d.trim(e) for e in exprs)}, {literal(default)})"


def _name_or_cid(d: Dialect, alias: str) -> str:
    """The lot's CONTAINERNAME, the row's CID when the lot has none (the original's
    ``NVL(TRIM(c.CONTAINERNAME), TRIM(x.CONTAINERID))``)."""
    return f"COALESCE({d.trim('c.CONTAINERNAME')}, {d.trim(alias + '.CONTAINERID')})"


def qty_sum(alias: str, with_defect: bool) -> str:
    names = ["REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY", "PROCESSEDQTY"]
    names += ["DEFECTQTY"] if with_defect else []
    return " + ".join(f"COALESCE({alias}.{n}, 0)" for n in names)


Statement = tuple[list[str], str, str]  # select expressions, FROM/WHERE tail, ORDER BY


def _history(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["h.CONTAINERID", "h.WORKCENTERNAME", "h.EQUIPMENTID", "h.EQUIPMENTNAME", "h.SPECNAME",
             ts("h.TRACKINTIMESTAMP"), ts("h.TRACKOUTTIMESTAMP"), "h.TRACKINQTY", "h.TRACKOUTQTY",
             "h.FINISHEDRUNCARD", "h.PJ_WORKORDER", "c.CONTAINERNAME", "c.PJ_TYPE", "c.PJ_BOP",
             "c.FIRSTNAME",
             "ROW_NUMBER() OVER (PARTITION BY h.CONTAINERID, h.EQUIPMENTID, h.SPECNAME, "
             "h.TRACKINTIMESTAMP ORDER BY h.TRACKOUTTIMESTAMP DESC NULLS LAST)"]
    tail = (f"FROM {t['DW_MES_LOTWIPHISTORY']} h LEFT JOIN {t['DW_MES_CONTAINER']} c ON c.CONTAINERID = h.CONTAINERID "
            "WHERE h.CONTAINERID IN ({cids}) AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL")
    return exprs, tail, "CONTAINERID, TRACKINTIMESTAMP, EQUIPMENTID, SPECNAME"


def _upstream_history(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["h.CONTAINERID", "h.WORKCENTERNAME", group_case(d, "h.WORKCENTERNAME"), "h.EQUIPMENTID",
             "h.EQUIPMENTNAME", "h.SPECNAME", ts("h.TRACKINTIMESTAMP"), "COALESCE(h.TRACKINQTY, 0)",
             "ROW_NUMBER() OVER (PARTITION BY h.CONTAINERID, h.WORKCENTERNAME, h.EQUIPMENTNAME "
             "ORDER BY h.TRACKINTIMESTAMP DESC)"]
    tail = (f"FROM {t['DW_MES_LOTWIPHISTORY']} h WHERE h.CONTAINERID IN ({{cids}}) "
            "AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL")
    return exprs, tail, "CONTAINERID, TRACKINTIMESTAMP"


def _materials(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["m.CONTAINERID", "c.CONTAINERNAME", "m.MATERIALPARTNAME", "m.MATERIALLOTNAME",
             "m.QTYCONSUMED", "m.WORKCENTERNAME", "m.SPECNAME", "m.EQUIPMENTNAME", ts("m.TXNDATE"),
             "m.DESCRIPTION"]  # the real column; the domain names it MATERIALDESCRIPTION
    tail = (f"FROM {t['DW_MES_LOTMATERIALSHISTORY']} m LEFT JOIN {t['DW_MES_CONTAINER']} c "
            "ON c.CONTAINERID = m.CONTAINERID WHERE m.CONTAINERID IN ({cids})")
    return exprs, tail, "CONTAINERID, TXNDATE, MATERIALLOTNAME"


def _rejects(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    qty = [f"COALESCE(r.{n}, 0)" for n in
           ("REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY", "PROCESSEDQTY")]
    exprs = ["r.CONTAINERID", _name_or_cid(d, "r"), _na(d, "s.WORK_CENTER", "r.WORKCENTERNAME"),
             _na(d, "s.WORK_CENTER_GROUP", "r.WORKCENTERNAME"),
             f"COALESCE(s.WORKCENTERSEQUENCE_GROUP, {literal(str(NO_SEQUENCE))})", _na(d, "c.PRODUCTLINENAME"),
             _na(d, "c.PJ_FUNCTION"), _na(d, "c.PJ_TYPE"), _na(d, "c.PRODUCTNAME"), _na(d, "r.SPECNAME"),
             _na(d, "r.LOSSREASONNAME", default=UNFILLED_REASON), _na(d, "r.EQUIPMENTNAME"),
             d.trim("r.REJECTCOMMENT"), *qty, qty_sum("r", with_defect=False), "COALESCE(r.DEFECTQTY, 0)",
             ts("r.TXNDATE"), ts("r.TXNDATE"), d.day("r.TXNDATE")]
    # The original's spec map, MIN(..) KEEP (DENSE_RANK FIRST ORDER BY WORKCENTERSEQUENCE_GROUP)
    # per SPEC, written portably: the MIN of each column over a spec's rows of its lowest
    # sequence (all its rows when no row has one, as NULLs rank last). One row per spec, so
    # the join never multiplies rejects.
    view = t["DW_MES_SPEC_WORKCENTER_V"]
    spec = (f"SELECT v.SPEC, MIN(v.WORK_CENTER) AS WORK_CENTER, MIN(v.WORK_CENTER_GROUP) AS WORK_CENTER_GROUP, "
            f"MIN(v.WORKCENTERSEQUENCE_GROUP) AS WORKCENTERSEQUENCE_GROUP FROM {view} v JOIN "
            f"(SELECT SPEC, MIN(WORKCENTERSEQUENCE_GROUP) AS FIRST_SEQ FROM {view} WHERE SPEC IS NOT NULL "
            f"GROUP BY SPEC) f ON f.SPEC = v.SPEC AND (f.FIRST_SEQ IS NULL OR v.WORKCENTERSEQUENCE_GROUP = f.FIRST_SEQ) "
            f"GROUP BY v.SPEC")
    tail = (f"FROM {t['DW_MES_LOTREJECTHISTORY']} r LEFT JOIN {t['DW_MES_CONTAINER']} c ON c.CONTAINERID = r.CONTAINERID "
            f"LEFT JOIN ({spec}) s ON s.SPEC = TRIM(r.SPECNAME) WHERE r.CONTAINERID IN ({{cids}})")
    # lot_rejects.sql's order within one lot (the result's columns), after the CID (D11)
    return exprs, tail, ("CONTAINERID, TXN_DAY DESC, WORKCENTERSEQUENCE_GROUP, WORKCENTERNAME, "
                         "REJECT_TOTAL_QTY DESC, CONTAINERNAME, TXNDATE DESC")


def _downstream_rejects(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["r.CONTAINERID", "r.WORKCENTERNAME", group_case(d, "r.WORKCENTERNAME"),
             _na(d, "r.LOSSREASONNAME", default=UNFILLED_REASON), _na(d, "r.EQUIPMENTNAME"),
             qty_sum("r", with_defect=True), ts("r.TXNDATE")]
    tail = f"FROM {t['DW_MES_LOTREJECTHISTORY']} r WHERE r.CONTAINERID IN ({{cids}})"
    return exprs, tail, "CONTAINERID, TXNDATE"


def _holds(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["h.CONTAINERID", _name_or_cid(d, "h"), "h.WORKCENTERNAME", ts("h.HOLDTXNDATE"), "h.HOLDEMP",
             "h.HOLDEMPDEPTNAME", "h.HOLDREASONNAME", "h.HOLDCOMMENTS", ts("h.RELEASETXNDATE"),
             "h.RELEASEEMP", "h.RELEASECOMMENTS", "h.NCRID",
             "CASE WHEN h.RELEASETXNDATE IS NULL THEN 'HOLD' ELSE 'RELEASED' END",
             d.round(d.hours_to_now('h.RELEASETXNDATE', 'h.HOLDTXNDATE'), 2)]
    tail = (f"FROM {t['DW_MES_HOLDRELEASEHISTORY']} h LEFT JOIN {t['DW_MES_CONTAINER']} c "
            "ON c.CONTAINERID = h.CONTAINERID WHERE h.CONTAINERID IN ({cids})")
    return exprs, tail, "CONTAINERID, HOLDTXNDATE DESC"  # lot_holds.sql's order within one lot (D11)


def _jobs(d: Dialect) -> Statement:
    t, ts = d.tables, d.ts
    exprs = ["j.JOBID", "j.RESOURCEID", "j.RESOURCENAME", "j.JOBSTATUS", "j.JOBMODELNAME",
             "j.JOBORDERNAME", ts("j.CREATEDATE"), ts("j.COMPLETEDATE"), "j.CAUSECODENAME",
             "j.REPAIRCODENAME", "j.SYMPTOMCODENAME", "j.CONTAINERIDS", "j.CONTAINERNAMES", "NULL"]
    tail = f"FROM {t['DW_MES_JOB']} j WHERE j.CONTAINERIDS IS NOT NULL AND {{jobs_match}}"
    # event_fetcher.py's ORDER BY j.CREATEDATE DESC (Oracle's DESC puts NULLs first, spelled
    # out for SQLite), JOBID for its ties; each job's rows follow in the unit's CID order, so
    # one CID's jobs come newest first as in the original's per-CID lists (D3).
    return exprs, tail, "CREATEDATE DESC NULLS FIRST, JOBID"


#: Statement builders; ``{cids}`` marks the IN list, ``{jobs_match}`` the jobs predicate.
_STATEMENTS = {
    "history": _history, "upstream_history": _upstream_history, "materials": _materials,
    "rejects": _rejects, "downstream_rejects": _downstream_rejects, "holds": _holds, "jobs": _jobs,
}


def jobs_scan_sql(dialect: Dialect) -> str:
    """The jobs domain's one read per trace job: every job that lists CIDs, no CID filter and
    no ORDER BY (a sort of the whole table before its first row; each unit orders its own few
    rows as the per-unit statement, :func:`.base.order_jobs`). DW_MES_JOB has no index on
    CONTAINERIDS, so the per-unit statement reads all of it once per 1,000 CIDs; this one reads
    it once, and the caller keeps the jobs that list one of the job's CIDs (:func:`.base.expand_jobs`):
    the events kind's :func:`~tracebus.trace.events.jobs_domain.scan_jobs`."""
    exprs, tail, _ = _jobs(dialect)
    tail = tail.replace(" AND {jobs_match}", "")
    listed = ", ".join(f"{e} AS {c}" for e, c in zip(exprs, columns("jobs"), strict=True))
    return f"SELECT {listed} {tail}"


def builder(domain: str) -> Callable[[Dialect], Statement]:
    """The function that builds ``domain``'s statement (for :mod:`.catalog`'s origins)."""
    return _STATEMENTS[domain]


def select_sql(dialect: Dialect, domain: str, n_cids: int) -> str:
    """The statement of one domain for ``n_cids`` bind variables named ``p0 .. p{n-1}``.

    The result columns are named and ordered as ``domains.columns(domain)``. History and
    upstream_history keep only their ``ROW_NUMBER() = 1`` rows (the dedup of DOMAIN.md §1).
    """
    cols = columns(domain)
    exprs, tail, order = _STATEMENTS[domain](dialect)
    binds = [f":p{i}" for i in range(n_cids)]
    tail = tail.replace("{cids}", ", ".join(binds))
    tail = tail.replace("{jobs_match}", dialect.contains_any("j.CONTAINERIDS", binds))
    if len(exprs) == len(cols) + 1:  # a trailing ROW_NUMBER: filter on it in an outer query
        inner = ", ".join(f"{e} AS {c}" for e, c in zip(exprs, (*cols, "RN")))
        return f"SELECT {', '.join(cols)} FROM (SELECT {inner} {tail}) ranked WHERE RN = 1 ORDER BY {order}"
    listed = ", ".join(f"{e} AS {c}" for e, c in zip(exprs, cols, strict=True))
    return f"SELECT {listed} {tail} ORDER BY {order}"
