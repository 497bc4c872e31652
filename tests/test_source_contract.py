"""One contract for every event source: SQLite and PostgreSQL always (the suite's own server,
holding the same sample), Oracle when a DSN is configured.

The expected rows of each domain come from plain ``SELECT *`` reads of the tables and the
rules of DOMAIN.md section 1 re-implemented here in Python (dedup, null defaults, totals,
workcenter groups), independently of the statements the sources build.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from datetime import datetime

import pytest

from api.settings import ApiSettings
from tracebus.errors import InvalidParams
from tracebus.trace.errors import SourceError
from tracebus.trace import domains
from tracebus.trace.sources import IN_LIMIT, open_source
from tracebus.trace.sources.oracle import OracleSource
from tracebus.trace.sources.queries import ORACLE, select_sql
from tracebus.trace.sources.sqlite import SqliteSource

_ORACLE_TABLES = dict(ORACLE.tables)


class Reference:
    """Direct reads of whole rows, as dicts, through a DB-API connection."""

    def __init__(self, conn, tables: dict[str, str], date_bind=lambda b: b, instr: str = "INSTR"):
        self.conn, self.tables, self.date_bind, self.instr = conn, tables, date_bind, instr

    def _query(self, sql: str, params: dict) -> list[dict]:
        cur = self.conn.cursor()
        cur.execute(sql, params)
        names = [d[0].upper() for d in cur.description]
        out = [{n: (v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else v)
                for n, v in zip(names, row)} for row in cur.fetchall()]
        cur.close()
        return out

    def rows(self, table: str, cids: list[str], column: str = "CONTAINERID") -> list[dict]:
        out = []
        for i in range(0, len(cids), 500):
            part = cids[i:i + 500]
            marks = ", ".join(f":p{k}" for k in range(len(part)))
            out += self._query(f"SELECT * FROM {self.tables[table]} WHERE {column} IN ({marks})",
                               {f"p{k}": c for k, c in enumerate(part)})
        return out

    def jobs_listing(self, cid: str) -> list[dict]:
        return self._query(f"SELECT * FROM {self.tables['DW_MES_JOB']} WHERE {self.instr}(CONTAINERIDS, :c) > 0",
                           {"c": cid})

    def spec_map(self) -> dict[str, tuple]:
        """SPEC -> (WORK_CENTER, WORK_CENTER_GROUP, sequence): the MINs over the spec's rows of
        its lowest sequence (all its rows when none has one), as the original's KEEP FIRST."""
        by_spec: dict[str, list[dict]] = {}
        for r in self._query(f"SELECT * FROM {self.tables['DW_MES_SPEC_WORKCENTER_V']}", {}):
            if r["SPEC"] is not None:
                by_spec.setdefault(r["SPEC"], []).append(r)
        out = {}
        for spec, rows in by_spec.items():
            seqs = [r["WORKCENTERSEQUENCE_GROUP"] for r in rows if r["WORKCENTERSEQUENCE_GROUP"] is not None]
            first = [r for r in rows if not seqs or r["WORKCENTERSEQUENCE_GROUP"] == min(seqs)]
            low = lambda col: min((r[col] for r in first if r[col] is not None), default=None)  # noqa: E731
            out[spec] = (low("WORK_CENTER"), low("WORK_CENTER_GROUP"), min(seqs, default=None))
        return out


def _group(name):
    group = domains.workcenter_group(name)
    return group.name if group else None


def _nz(v):
    return 0 if v is None else v


def _trim(v):
    """Oracle's TRIM: spaces off both ends, NULL when nothing is left."""
    return (v.strip(" ") or None) if isinstance(v, str) else v


def _na(*values, default="(NA)"):
    """The original's NVL(TRIM(a), NVL(TRIM(b), default))."""
    return next((t for t in map(_trim, values) if t is not None), default)


def _latest(rows, key, order):
    best = {}
    for r in rows:
        k = key(r)
        if k not in best or (order(r) or "") > (order(best[k]) or ""):
            best[k] = r
    return best.values()


def expected(ref: Reference, domain: str, cids: list[str]) -> list[tuple]:
    """The rows ``domain`` must give for ``cids``, worked out from the tables by the rules below
    (one function per domain); ``cell(row, column)`` is the row's container's column."""
    box = {c["CONTAINERID"]: c for c in ref.rows("DW_MES_CONTAINER", cids)}
    cell = lambda r, col: box.get(r["CONTAINERID"], {}).get(col)  # noqa: E731
    return _EXPECTED[domain](ref, cids, cell)


def _tracked(ref: Reference, cids: list[str]) -> list[dict]:
    return [r for r in ref.rows("DW_MES_LOTWIPHISTORY", cids)
            if r["EQUIPMENTID"] is not None and r["TRACKINTIMESTAMP"] is not None]


def _history(ref: Reference, cids: list[str], c) -> list[tuple]:
    kept = _latest(_tracked(ref, cids),
                   lambda r: (r["CONTAINERID"], r["EQUIPMENTID"], r["SPECNAME"], r["TRACKINTIMESTAMP"]),
                   lambda r: r["TRACKOUTTIMESTAMP"])
    return [tuple(r[k] for k in domains.COLUMNS["history"][:11])
            + (c(r, "CONTAINERNAME"), c(r, "PJ_TYPE"), c(r, "PJ_BOP"), c(r, "FIRSTNAME")) for r in kept]


def _upstream_history(ref: Reference, cids: list[str], c) -> list[tuple]:
    kept = _latest(_tracked(ref, cids), lambda r: (r["CONTAINERID"], r["WORKCENTERNAME"], r["EQUIPMENTNAME"]),
                   lambda r: r["TRACKINTIMESTAMP"])
    return [(r["CONTAINERID"], r["WORKCENTERNAME"], _group(r["WORKCENTERNAME"]), r["EQUIPMENTID"],
             r["EQUIPMENTNAME"], r["SPECNAME"], r["TRACKINTIMESTAMP"], _nz(r["TRACKINQTY"])) for r in kept]


def _materials(ref: Reference, cids: list[str], c) -> list[tuple]:
    return [(r["CONTAINERID"], c(r, "CONTAINERNAME"), r["MATERIALPARTNAME"], r["MATERIALLOTNAME"],
             r["QTYCONSUMED"], r["WORKCENTERNAME"], r["SPECNAME"], r["EQUIPMENTNAME"], r["TXNDATE"],
             r["DESCRIPTION"])
            for r in ref.rows("DW_MES_LOTMATERIALSHISTORY", cids)]


_FIVE_QTYS = ("REJECTQTY", "STANDBYQTY", "QTYTOPROCESS", "INPROCESSQTY", "PROCESSEDQTY")


def _downstream_rejects(ref: Reference, cids: list[str], c) -> list[tuple]:
    return [(r["CONTAINERID"], r["WORKCENTERNAME"], _group(r["WORKCENTERNAME"]),
             _na(r["LOSSREASONNAME"], default="(未填寫)"), _na(r["EQUIPMENTNAME"]),
             sum(_nz(r[k]) for k in _FIVE_QTYS) + _nz(r["DEFECTQTY"]), r["TXNDATE"])
            for r in ref.rows("DW_MES_LOTREJECTHISTORY", cids)]


def _rejects(ref: Reference, cids: list[str], c) -> list[tuple]:
    specs = ref.spec_map()
    out = []
    for r in ref.rows("DW_MES_LOTREJECTHISTORY", cids):
        center, group, seq = specs.get(_trim(r["SPECNAME"]), (None, None, None))
        qty = [_nz(r[k]) for k in _FIVE_QTYS]
        out.append((r["CONTAINERID"], _na(c(r, "CONTAINERNAME"), r["CONTAINERID"]),
                    _na(center, r["WORKCENTERNAME"]), _na(group, r["WORKCENTERNAME"]),
                    "999" if seq is None else seq, _na(c(r, "PRODUCTLINENAME")), _na(c(r, "PJ_FUNCTION")),
                    _na(c(r, "PJ_TYPE")), _na(c(r, "PRODUCTNAME")), _na(r["SPECNAME"]),
                    _na(r["LOSSREASONNAME"], default="(未填寫)"), _na(r["EQUIPMENTNAME"]),
                    _trim(r["REJECTCOMMENT"]), *qty, sum(qty), _nz(r["DEFECTQTY"]),
                    r["TXNDATE"], r["TXNDATE"], r["TXNDATE"][:10]))
    return out


def _holds(ref: Reference, cids: list[str], c) -> list[tuple]:
    out = []
    for r in ref.rows("DW_MES_HOLDRELEASEHISTORY", cids):
        released = r["RELEASETXNDATE"] is not None
        hours = None
        if released:
            delta = datetime.fromisoformat(r["RELEASETXNDATE"]) - datetime.fromisoformat(r["HOLDTXNDATE"])
            hours = round(delta.total_seconds() / 3600, 2)
        out.append(tuple(r[k] for k in domains.COLUMNS["holds"][:1]) + (_na(c(r, "CONTAINERNAME"), r["CONTAINERID"]),)
                   + tuple(r[k] for k in domains.COLUMNS["holds"][2:12])
                   + ("RELEASED" if released else "HOLD", hours))
    return out


def _jobs(ref: Reference, cids: list[str], c) -> list[tuple]:
    cols = domains.COLUMNS["jobs"][:-1]
    return [tuple(j[k] for k in cols) + (cid,) for cid in cids for j in ref.jobs_listing(cid)]


_EXPECTED = {"history": _history, "upstream_history": _upstream_history, "materials": _materials,
             "rejects": _rejects, "downstream_rejects": _downstream_rejects, "holds": _holds, "jobs": _jobs}


def _collect(batches) -> tuple[list, list[tuple]]:
    columns, rows = None, []
    for cols, batch in batches:
        columns = columns or cols
        assert cols == columns and batch
        rows.extend(batch)
    return columns, rows


def _comparable(domain: str, rows: list[tuple]) -> Counter:
    """Rows as a multiset; hold hours are rounded arithmetic (and run with the clock while on
    hold), so they are compared apart, with a tolerance, by :func:`_assert_hold_hours`."""
    if domain != "holds":
        return Counter(rows)
    return Counter(r[:-1] for r in rows)


def _assert_hold_hours(rows: list[tuple], want: list[tuple]) -> None:
    now = datetime.now()
    for got, ref in zip(sorted(rows, key=repr), sorted(want, key=repr)):
        if got[-2] == "HOLD":
            hours = (now - datetime.fromisoformat(got[3])).total_seconds() / 3600
            assert abs(got[-1] - hours) < 0.1
        else:
            assert abs(got[-1] - ref[-1]) <= 0.0101


class PgReader:
    """A psycopg connection that reads statements with ``:name`` binds, as the other references
    (NUMERIC as the sources give it: an int when whole, else a float)."""

    def __init__(self, dsn: str):
        import psycopg
        from tracebus.trace.sources.postgres import NumberLoader

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.adapters.register_loader("numeric", NumberLoader)

    def cursor(self):
        import psycopg
        from tracebus.trace.sources.postgres import pg_params

        class Cursor(psycopg.Cursor):
            def execute(self, sql, params=None, **kw):
                return super().execute(pg_params(sql), params, **kw)

        return Cursor(self.conn)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["sqlite", "postgres", "oracle"])
def contract(request, sample_db):
    """(source, reference reader, CIDs that exist in that database)."""
    if request.param in ("sqlite", "postgres"):
        sample = sqlite3.connect(sample_db)
        cids = [r[0] for r in sample.execute("SELECT CONTAINERID FROM DW_MES_CONTAINER ORDER BY rowid")]
    if request.param == "sqlite":
        source = open_source(ApiSettings.from_env({}, source="sqlite", sqlite_path=str(sample_db)))
        conn = sample
        ref = Reference(conn, {t: t for t in _ORACLE_TABLES})
    elif request.param == "postgres":
        sample.close()
        dsn = request.getfixturevalue("postgres_sample")  # the same sample as sample_db
        source = open_source(ApiSettings.from_env({}, source="postgres", postgres_dsn=dsn))
        conn = PgReader(dsn)
        ref = Reference(conn, {t: t for t in _ORACLE_TABLES}, lambda b: f"CAST({b} AS timestamp)", "STRPOS")
    else:
        settings = ApiSettings.from_env()
        if not settings.oracle_dsn:
            pytest.skip("TRACEBUS_ORACLE_DSN is not configured: the Oracle run of the contract is skipped")
        import oracledb
        source = open_source(settings.replace(source="oracle"))
        conn = oracledb.connect(user=settings.oracle_user, password=settings.oracle_password, dsn=settings.oracle_dsn)
        ref = Reference(conn, _ORACLE_TABLES, lambda b: f"TO_DATE({b}, 'YYYY-MM-DD HH24:MI:SS')")
        cids = [r["CONTAINERID"] for r in ref._query(
            "SELECT DISTINCT CONTAINERID FROM DWH.DW_MES_LOTREJECTHISTORY WHERE ROWNUM <= 5000", {})][:1100]
    assert len(cids) > IN_LIMIT, "the contract needs more CIDs than one IN list holds"
    yield source, ref, cids
    source.close()
    conn.close()


@pytest.mark.parametrize("domain", domains.DOMAINS)
def test_rows_equal_the_reference_across_in_lists(contract, domain):
    source, ref, cids = contract
    # Given more CIDs than two IN lists, with unknown ones, duplicates and padding mixed in
    unknown = [f"ffffffff{i:08x}" for i in range(600)]
    asked = cids + unknown + cids[:50] + [f"  {cids[0]} "]
    # When the source fetches them
    columns, rows = _collect(source.fetch(domain, asked, batch_rows=500))
    # Then the rows are exactly the reference rows of the known CIDs
    want = expected(ref, domain, cids)
    assert want, f"the sample has no {domain} rows; the test would prove nothing"
    assert columns == list(domains.columns(domain))
    assert all(len(r) == len(columns) for r in rows)
    assert _comparable(domain, rows) == _comparable(domain, want)
    if domain == "holds":
        _assert_hold_hours(rows, want)


@pytest.mark.parametrize("domain, batch_rows", [("history", 7), ("jobs", 1), ("rejects", 1000)])
def test_batches_never_exceed_batch_rows(contract, domain, batch_rows):
    source, _, cids = contract
    sizes = [len(rows) for _, rows in source.fetch(domain, cids, batch_rows)]
    _, everything = _collect(source.fetch(domain, cids, 100000))
    assert sizes and max(sizes) <= batch_rows and all(sizes)
    assert sum(sizes) == len(everything)


def test_unknown_cids_return_nothing(contract):
    source, _, _ = contract
    for domain in domains.DOMAINS:
        assert list(source.fetch(domain, ["0000000000000000", "nope", "", " "], 10)) == []
    assert list(source.fetch("history", [], 10)) == []


def test_duplicate_cids_do_not_duplicate_rows(contract):
    source, _, cids = contract
    some = cids[:40]
    for domain in domains.DOMAINS:
        _, once = _collect(source.fetch(domain, some, 1000))
        _, thrice = _collect(source.fetch(domain, some * 3 + [f" {c}" for c in some], 1000))
        assert _comparable(domain, thrice) == _comparable(domain, once)


def test_bad_requests_are_invalid_params_before_any_query(contract):
    source, _, cids = contract
    with pytest.raises(InvalidParams):
        source.fetch("bogus", cids, 10)
    with pytest.raises(InvalidParams):
        source.fetch("history", cids, 0)
    with pytest.raises(InvalidParams):
        source.fetch("history", "abc", 10)


def test_missing_database_is_a_permanent_source_error(tmp_path):
    source = SqliteSource(tmp_path / "absent.db")
    with pytest.raises(SourceError) as info:
        list(source.fetch("history", ["a"], 10))
    assert info.value.transient is False
    assert not (tmp_path / "absent.db").exists()


def test_a_locked_database_is_a_transient_source_error(sample_db, tmp_path):
    path = tmp_path / "locked.db"
    path.write_bytes(sample_db.read_bytes())
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(SourceError, match="locked") as info:
            list(SqliteSource(path, busy_timeout_ms=50).fetch("history", ["a"], 10))
        assert info.value.transient is True
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_an_unreachable_oracle_is_a_transient_source_error():
    # A real connection attempt to a closed local port: no Oracle needed, nothing faked.
    source = OracleSource("127.0.0.1:1/nothing", "u", "p", call_timeout_ms=2000)
    with pytest.raises(SourceError) as info:
        list(source.fetch("history", ["488103800029578b"], 10))
    assert info.value.transient is True
    assert "DPY-" in info.value.message
    source.close()


def test_a_forked_child_opens_its_own_connection(sample_db):
    source = SqliteSource(sample_db)
    cid = sqlite3.connect(sample_db).execute("SELECT CONTAINERID FROM DW_MES_LOTWIPHISTORY LIMIT 1").fetchone()[0]
    parent_rows = _collect(source.fetch("history", [cid], 10))[1]
    inherited = source._conn
    pid = os.fork()
    if pid == 0:
        ok = _collect(source.fetch("history", [cid], 10))[1] == parent_rows and source._conn is not inherited
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert source._conn is inherited  # the parent's connection was left alone
    source.close()


def test_oracle_statements_bind_every_cid_and_stay_within_one_in_list():
    for domain in domains.DOMAINS:
        sql = select_sql(ORACLE, domain, IN_LIMIT)
        assert ":p999" in sql and ":p1000" not in sql and "DWH." in sql
        assert "'488103800029578b'" not in sql
    assert "INSTR(j.CONTAINERIDS, :p0) > 0 OR" in select_sql(ORACLE, "jobs", 2)


def test_an_unreachable_postgres_is_a_transient_source_error_without_the_password():
    # A real connection attempt to a closed local port: nothing faked.
    from tests.redis_server import free_port
    from tracebus.trace.sources.postgres import PostgresSource

    source = PostgresSource(f"postgresql://u:s3cret-pw@127.0.0.1:{free_port()}/db", connect_timeout_s=2)
    with pytest.raises(SourceError) as info:
        list(source.fetch("history", ["488103800029578b"], 10))
    assert info.value.transient is True
    assert info.value.message.startswith("postgres: ") and "s3cret-pw" not in info.value.message
    assert "s3cret-pw" not in repr(source)
    source.close()


def test_a_postgres_statement_the_server_refuses_is_a_permanent_source_error(postgres_sample):
    from tracebus.trace.sources.postgres import PostgresSource

    source = PostgresSource(postgres_sample)
    with pytest.raises(SourceError) as info:
        list(source.execute("SELECT NO_SUCH_COLUMN FROM DW_MES_CONTAINER WHERE CONTAINERID = :p0", {"p0": "x"}, 10))
    assert info.value.transient is False and "no_such_column" in info.value.message
    # The connection that failed is not given back; the next statement runs on a new one.
    assert list(source.execute("SELECT COUNT(*) FROM DW_MES_CONTAINER WHERE CONTAINERID = :p0", {"p0": "x"}, 10)) \
        == [[(0,)]]
    source.close()


def test_postgres_rows_come_batch_by_batch_from_a_server_side_cursor(postgres_sample, sample_db):
    import psycopg
    from tracebus.trace.sources.postgres import PostgresSource

    cids = [r[0] for r in sqlite3.connect(sample_db).execute("SELECT CONTAINERID FROM DW_MES_CONTAINER LIMIT 200")]
    source = PostgresSource(postgres_sample)
    batches = source.fetch("history", cids, 7)
    first = next(batches)
    assert len(first[1]) == 7
    # While the reader holds one batch, its session's last statement is a FETCH of 7 rows from
    # the named cursor that holds the rest on the server.
    with psycopg.connect(postgres_sample, autocommit=True) as watcher:
        (query,) = watcher.execute("SELECT query FROM pg_stat_activity WHERE application_name = 'tracebus' "
                                   "AND state = 'idle in transaction'").fetchone()
    assert query.startswith('FETCH FORWARD 7 FROM "tracebus_')
    rest = [row for _, rows in batches for row in rows]
    assert len(first[1]) + len(rest) == len(_collect(source.fetch("history", cids, 100000))[1])
    source.close()


def test_a_forked_child_opens_its_own_postgres_connection(postgres_sample, sample_db):
    from tracebus.trace.sources.postgres import PostgresSource

    source = PostgresSource(postgres_sample)
    cid = sqlite3.connect(sample_db).execute("SELECT CONTAINERID FROM DW_MES_LOTWIPHISTORY LIMIT 1").fetchone()[0]
    parent_rows = _collect(source.fetch("history", [cid], 10))[1]
    (inherited,) = source._idle
    pid = os.fork()
    if pid == 0:
        ok = _collect(source.fetch("history", [cid], 10))[1] == parent_rows and source._idle[0] is not inherited
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert source._idle == [inherited] and not inherited.closed  # the parent's connection was left alone
    assert _collect(source.fetch("history", [cid], 10))[1] == parent_rows
    source.close()
