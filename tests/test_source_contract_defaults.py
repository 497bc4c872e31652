"""The defaults, trimming and fallbacks the sources copy from the original's SQL (docs/sources.md).

Rows the synthetic data never holds (a lot missing from DW_MES_CONTAINER, padded or blank
text, a spec listed under several sequences, a NULL track-in quantity) are added to a copy of
the sample database; each expected value is what the original's statement returns for them.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from api.settings import ApiSettings
from tracebus.trace import domains
from tracebus.trace.events import jobs_domain
from tracebus.trace.sources import open_source
from tracebus.trace.sources.base import order_jobs

ORPHAN = "0000ffff0000ffff"  # a CID with events but no DW_MES_CONTAINER row


def _edge_rows(conn, mark: str) -> None:
    """Add the edge rows to a copy of the sample (``mark``: the driver's bind marker)."""
    def insert(sql: str, rows) -> None:
        cur = conn.cursor()
        cur.executemany(sql.replace("?", mark), rows)
        cur.close()

    view = [("SPEC_EDGE", "WC_LATE", "GRP_LATE", "20"), ("SPEC_EDGE", "WC_B", "GRP_B", "10"),
            ("SPEC_EDGE", "WC_A", "GRP_A", "10"), ("SPEC_NOSEQ", "WC_N2", None, None),
            ("SPEC_NOSEQ", "WC_N1", "GRP_N", None), (None, "WC_NULL", "GRP_NULL", "01")]
    insert("INSERT INTO DW_MES_SPEC_WORKCENTER_V (SPEC, WORK_CENTER, WORK_CENTER_GROUP, "
           "WORKCENTERSEQUENCE_GROUP) VALUES (?, ?, ?, ?)", view)
    rejects = [  # (TXNDATE, SPECNAME, WORKCENTERNAME, LOSSREASONNAME, EQUIPMENTNAME, REJECTCOMMENT)
        ("2025-03-01 10:00:00", "  SPEC_EDGE ", "切割", None, "   ", "  note  "),
        ("2025-03-02 10:00:00", "SPEC_NOSEQ", " 切割 ", "  ", " EQ-1 ", "   "),
        ("2025-03-03 10:00:00", "NO_SUCH_SPEC", "  ", " 刮傷 ", None, None),
    ]
    insert("INSERT INTO DW_MES_LOTREJECTHISTORY (CONTAINERID, TXNDATE, SPECNAME, WORKCENTERNAME, "
           "LOSSREASONNAME, EQUIPMENTNAME, REJECTCOMMENT, REJECTQTY) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
           [(ORPHAN, *r) for r in rejects])
    insert("INSERT INTO DW_MES_HOLDRELEASEHISTORY (CONTAINERID, HOLDTXNDATE, RELEASETXNDATE) "
           "VALUES (?, ?, ?)", [(ORPHAN, "2025-03-01 08:00:00", "2025-03-01 10:00:00"),
                                (ORPHAN, "2025-03-05 08:00:00", "2025-03-05 09:30:00")])
    insert("INSERT INTO DW_MES_LOTWIPHISTORY (CONTAINERID, WORKCENTERNAME, EQUIPMENTID, EQUIPMENTNAME, "
           "SPECNAME, TRACKINTIMESTAMP, TRACKINQTY) VALUES (?, '切割', 'E1', 'EQ-1', 'S', "
           "'2025-03-01 07:00:00', NULL)", [(ORPHAN,)])
    jobs = [("JZ1", "2025-03-01 08:00:00"), ("JZ2", None), ("JZ3", "2025-03-04 08:00:00"),
            ("JZ0", "2025-03-04 08:00:00")]
    insert("INSERT INTO DW_MES_JOB (JOBID, CREATEDATE, CONTAINERIDS) VALUES (?, ?, ?)",
           [(j, t, f"X,{ORPHAN}") for j, t in jobs])
    conn.commit()
    conn.close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def source(request, sample_db, tmp_path_factory):
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("defaults") / "edge.db"
        shutil.copy(sample_db, path)
        _edge_rows(sqlite3.connect(path), "?")
        settings = ApiSettings.from_env({}, source="sqlite", sqlite_path=str(path))
    else:  # a database of its own on the suite's server, loaded with the same sample
        import psycopg
        from tracebus.trace.synth import DEFAULT_SEED
        from tracebus.trace.synth.postgres import generate_postgres

        dsn = request.getfixturevalue("postgres_server").database("edge_defaults", fresh=True)
        generate_postgres(dsn, scale=0.01, seed=DEFAULT_SEED)
        _edge_rows(psycopg.connect(dsn), "%s")
        settings = ApiSettings.from_env({}, source="postgres", postgres_dsn=dsn)
    src = open_source(settings)
    yield src
    src.close()


def _fetched(source, domain: str, cids=(ORPHAN,)) -> list[dict]:
    out = []
    for cols, batch in source.fetch(domain, list(cids), batch_rows=100):
        out += [dict(zip(cols, row)) for row in batch]
    return out


def _rows(source, domain: str) -> list[dict]:
    return sorted(_fetched(source, domain), key=lambda r: r.get("TXNDATE") or r.get("HOLDTXNDATE") or "")


def test_rejects_trim_default_and_fall_back_as_the_original(source):
    # Given three rejects of a lot missing from DW_MES_CONTAINER, with padded and blank text
    edge, noseq, unknown = _rows(source, "rejects")
    # Then the name falls back to the CID and the container's columns to '(NA)'
    assert {r["CONTAINERNAME"] for r in (edge, noseq, unknown)} == {ORPHAN}
    assert {r["PRODUCTNAME"] for r in (edge, noseq, unknown)} == {domains.NA}
    # And the padded spec finds its spec map row: the lowest sequence's MIN per column
    assert (edge["WORKCENTERNAME"], edge["WORKCENTER_GROUP"], edge["WORKCENTERSEQUENCE_GROUP"]) == \
        ("WC_A", "GRP_A", "10")
    assert edge["SPECNAME"] == "SPEC_EDGE"
    # And NULL or blank text takes the original's defaults; the rest is trimmed
    assert (edge["LOSSREASONNAME"], edge["EQUIPMENTNAME"], edge["REJECTCOMMENT"]) == \
        (domains.UNFILLED_REASON, domains.NA, "note")
    # And a spec with no sequence keeps all its rows for the MIN, and the 999 sequence
    assert (noseq["WORKCENTERNAME"], noseq["WORKCENTER_GROUP"], noseq["WORKCENTERSEQUENCE_GROUP"]) == \
        ("WC_N1", "GRP_N", "999")
    assert (noseq["LOSSREASONNAME"], noseq["EQUIPMENTNAME"], noseq["REJECTCOMMENT"]) == \
        (domains.UNFILLED_REASON, "EQ-1", None)
    # And an unknown spec falls back to the reject's own (trimmed) workcenter, then '(NA)'
    assert (unknown["WORKCENTERNAME"], unknown["WORKCENTER_GROUP"], unknown["WORKCENTERSEQUENCE_GROUP"]) == \
        (domains.NA, domains.NA, "999")
    assert unknown["LOSSREASONNAME"] == "刮傷"


def test_downstream_rejects_default_the_reason_and_the_equipment(source):
    rows = _rows(source, "downstream_rejects")
    assert [(r["LOSSREASONNAME"], r["EQUIPMENTNAME"]) for r in rows] == [
        (domains.UNFILLED_REASON, domains.NA), (domains.UNFILLED_REASON, "EQ-1"), ("刮傷", domains.NA)]
    # the workcenter is returned as stored (the original does not trim it)
    assert [r["WORKCENTERNAME"] for r in rows] == ["切割", " 切割 ", "  "]


def test_holds_name_falls_back_to_the_cid(source):
    first, _ = _rows(source, "holds")
    assert first["CONTAINERNAME"] == ORPHAN and first["HOLD_STATUS"] == "RELEASED" and first["HOLD_HOURS"] == 2


def test_one_lots_rows_come_in_the_originals_order_after_the_cid(source, sample_db):
    # Given the orphan lot and a sample lot with rejects and holds, the sample lot asked first
    other = sqlite3.connect(sample_db).execute(
        "SELECT CONTAINERID FROM DW_MES_HOLDRELEASEHISTORY WHERE CONTAINERID IN "
        "(SELECT CONTAINERID FROM DW_MES_LOTREJECTHISTORY) ORDER BY CONTAINERID DESC LIMIT 1").fetchone()[0]
    assert other > ORPHAN
    # Then rows come CID first; one lot's rejects by lot_rejects.sql's keys, its holds newest first
    rejects = _fetched(source, "rejects", (other, ORPHAN))
    assert [r["CONTAINERID"] for r in rejects] == sorted(r["CONTAINERID"] for r in rejects)
    assert [r["TXNDATE"] for r in rejects if r["CONTAINERID"] == ORPHAN] == [
        "2025-03-03 10:00:00", "2025-03-02 10:00:00", "2025-03-01 10:00:00"]
    holds = _fetched(source, "holds", (other, ORPHAN))
    assert [r["CONTAINERID"] for r in holds] == sorted(r["CONTAINERID"] for r in holds)
    assert [r["HOLDTXNDATE"] for r in holds if r["CONTAINERID"] == ORPHAN] == [
        "2025-03-05 08:00:00", "2025-03-01 08:00:00"]


def test_one_lots_jobs_come_newest_first_as_the_originals_order_by_createdate_desc(source):
    # Given four jobs listing the orphan lot, one without a CREATEDATE, two created together
    jobs = _fetched(source, "jobs")
    # Then they come as ORDER BY CREATEDATE DESC in Oracle (NULL first), JOBID for the tie
    assert [j["JOBID"] for j in jobs] == ["JZ2", "JZ0", "JZ3", "JZ1"]
    assert {j["CONTAINERID"] for j in jobs} == {ORPHAN}
    # And a trace's one read of DW_MES_JOB, ordered per unit, gives the same rows in that order
    scanned = order_jobs([r for _, batch in jobs_domain.scan_jobs(source, [ORPHAN], 100) for r in batch], [ORPHAN])
    assert [dict(zip(domains.columns("jobs"), r)) for r in scanned] == jobs


def test_upstream_history_defaults_a_null_track_in_quantity_to_zero(source):
    (row,) = _rows(source, "upstream_history")
    assert row["TRACKINQTY"] == 0
    (hist,) = _rows(source, "history")
    assert hist["TRACKINQTY"] is None  # lot_history.sql returns it as stored
