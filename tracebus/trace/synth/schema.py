"""DDL of the embedded SQLite database: the DWH tables of DOMAIN.md section 6.

Table names are the lower-case short forms (``lot_wip_history`` for
``DWH.DW_MES_LOTWIPHISTORY``); column names are Oracle's, upper case, so the sources select
the same columns on both. Dates are ISO text ``YYYY-MM-DD HH:MM:SS``. Indexes are created
after the bulk load (:data:`INDEXES`), which is several times faster than loading into
indexed tables.
"""

from __future__ import annotations

#: Column lists per table, in insert order.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "container": (
        ("CONTAINERID", "TEXT NOT NULL"), ("CONTAINERNAME", "TEXT NOT NULL"), ("SPLITFROMID", "TEXT"),
        ("ORIGINALCONTAINERID", "TEXT"), ("FIRSTNAME", "TEXT"), ("MFGORDERNAME", "TEXT"),
        ("PJ_TYPE", "TEXT"), ("PJ_BOP", "TEXT"), ("PJ_FUNCTION", "TEXT"), ("PRODUCTNAME", "TEXT"),
        ("PRODUCTLINENAME", "TEXT"), ("OBJECTTYPE", "TEXT"),
    ),
    "lot_wip_history": (
        ("CONTAINERID", "TEXT NOT NULL"), ("WORKCENTERNAME", "TEXT"), ("EQUIPMENTID", "TEXT"),
        ("EQUIPMENTNAME", "TEXT"), ("SPECNAME", "TEXT"), ("TRACKINTIMESTAMP", "TEXT"),
        ("TRACKOUTTIMESTAMP", "TEXT"), ("TRACKINQTY", "INTEGER"), ("TRACKOUTQTY", "INTEGER"),
        ("FINISHEDRUNCARD", "TEXT"), ("PJ_WORKORDER", "TEXT"),
    ),
    "lot_materials_history": (
        ("CONTAINERID", "TEXT NOT NULL"), ("MATERIALPARTNAME", "TEXT"), ("MATERIALLOTNAME", "TEXT"),
        ("QTYCONSUMED", "INTEGER"), ("WORKCENTERNAME", "TEXT"), ("SPECNAME", "TEXT"),
        ("EQUIPMENTNAME", "TEXT"), ("TXNDATE", "TEXT"), ("MATERIALDESCRIPTION", "TEXT"),
    ),
    "lot_reject_history": (
        ("CONTAINERID", "TEXT NOT NULL"), ("WORKCENTERNAME", "TEXT"), ("SPECNAME", "TEXT"),
        ("LOSSREASONNAME", "TEXT"), ("EQUIPMENTNAME", "TEXT"), ("REJECTCOMMENT", "TEXT"),
        ("REJECTQTY", "INTEGER"), ("STANDBYQTY", "INTEGER"), ("QTYTOPROCESS", "INTEGER"),
        ("INPROCESSQTY", "INTEGER"), ("PROCESSEDQTY", "INTEGER"), ("DEFECTQTY", "INTEGER"),
        ("TXNDATE", "TEXT"),
    ),
    "hold_release_history": (
        ("CONTAINERID", "TEXT NOT NULL"), ("WORKCENTERNAME", "TEXT"), ("HOLDTXNDATE", "TEXT"),
        ("HOLDEMP", "TEXT"), ("HOLDEMPDEPTNAME", "TEXT"), ("HOLDREASONNAME", "TEXT"),
        ("HOLDCOMMENTS", "TEXT"), ("RELEASETXNDATE", "TEXT"), ("RELEASEEMP", "TEXT"),
        ("RELEASECOMMENTS", "TEXT"), ("NCRID", "TEXT"),
    ),
    "job": (
        ("JOBID", "TEXT NOT NULL"), ("RESOURCEID", "TEXT"), ("RESOURCENAME", "TEXT"), ("JOBSTATUS", "TEXT"),
        ("JOBMODELNAME", "TEXT"), ("JOBORDERNAME", "TEXT"), ("CREATEDATE", "TEXT"), ("COMPLETEDATE", "TEXT"),
        ("CAUSECODENAME", "TEXT"), ("REPAIRCODENAME", "TEXT"), ("SYMPTOMCODENAME", "TEXT"),
        ("CONTAINERIDS", "TEXT"), ("CONTAINERNAMES", "TEXT"),
    ),
    "combined_assy_lots": (
        ("CONTAINERID", "TEXT NOT NULL"), ("CONTAINERNAME", "TEXT"), ("LOTID", "TEXT NOT NULL"),
        ("FINISHEDNAME", "TEXT"),
    ),
    # DWH.DW_MES_WIP, reduced to what the MSD detection reads (the lot's workflow).
    "wip": (
        ("CONTAINERID", "TEXT NOT NULL"), ("WORKFLOWNAME", "TEXT"), ("PRODUCTLINENAME", "TEXT"),
    ),
    "spec_workcenter": (
        ("SPEC", "TEXT NOT NULL"), ("WORK_CENTER", "TEXT"), ("WORK_CENTER_GROUP", "TEXT"),
        ("WORKCENTERSEQUENCE_GROUP", "INTEGER"),
    ),
}

#: Indexes, created after the load.
INDEXES: tuple[str, ...] = (
    "CREATE UNIQUE INDEX ux_container_id ON container (CONTAINERID)",
    "CREATE UNIQUE INDEX ux_container_name ON container (CONTAINERNAME)",
    "CREATE INDEX ix_container_split ON container (SPLITFROMID)",
    "CREATE INDEX ix_wip_cid ON lot_wip_history (CONTAINERID)",
    "CREATE INDEX ix_materials_cid ON lot_materials_history (CONTAINERID)",
    "CREATE INDEX ix_reject_cid ON lot_reject_history (CONTAINERID)",
    "CREATE INDEX ix_hold_cid ON hold_release_history (CONTAINERID)",
    "CREATE UNIQUE INDEX ux_job_id ON job (JOBID)",
    "CREATE INDEX ix_combined_cid ON combined_assy_lots (CONTAINERID)",
    "CREATE INDEX ix_combined_lot ON combined_assy_lots (LOTID)",
    "CREATE INDEX ix_wip_workflow_cid ON wip (CONTAINERID)",
    "CREATE UNIQUE INDEX ux_spec ON spec_workcenter (SPEC)",
)


def create_tables_sql() -> list[str]:
    """CREATE TABLE statements of every table, without indexes."""
    return [f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols)})"
            for name, cols in TABLES.items()]


def insert_sql(table: str) -> str:
    """The INSERT statement of one table, with one ``?`` per column."""
    cols = TABLES[table]
    return f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})"
