"""DDL of the embedded SQLite database: the real DWH tables that tracebus reads, by their real names.

Tables and columns are those of the DWH (``DWH.DW_MES_CONTAINER`` is ``DW_MES_CONTAINER``
here; the schema, with row counts, is ``tests/data/dwh_schema.json``), reduced to the
columns the sources read or filter on. Column types are the real ones mapped to SQLite
affinities: CHAR, VARCHAR2 and DATE are TEXT (dates as ISO text ``YYYY-MM-DD HH:MM:SS``),
NUMBER with scale 0 is INTEGER, any other NUMBER is NUMERIC. No column here is NOT NULL (every
real one is nullable but ``DW_MES_RESOURCE.RESOURCEID``, which the generator always fills). The indexes are exactly the real ones whose columns are
all here, under their real names: no extra one (the DWH has none on
``DW_MES_CONTAINER.SPLITFROMID``, ``DW_MES_WIP.CONTAINERID``,
``DW_MES_PJ_COMBINEDASSYLOTS.LOTID`` or ``DW_MES_JOB.JOBID``, so neither has this file).
They are created after the bulk load (:data:`INDEXES`), which is several times faster than
loading into indexed tables. ``tests/test_dwh_schema.py`` holds this file to the real schema.
"""

from __future__ import annotations

#: Column lists per table, in insert order.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "DW_MES_CONTAINER": (
        ("CONTAINERID", "TEXT"), ("CONTAINERNAME", "TEXT"), ("SPLITFROMID", "TEXT"),
        ("ORIGINALCONTAINERID", "TEXT"), ("FIRSTNAME", "TEXT"), ("MFGORDERNAME", "TEXT"),
        ("PJ_TYPE", "TEXT"), ("PJ_BOP", "TEXT"), ("PJ_FUNCTION", "TEXT"), ("PRODUCTNAME", "TEXT"),
        ("PRODUCTLINENAME", "TEXT"), ("OBJECTTYPE", "TEXT"),
    ),
    "DW_MES_LOTWIPHISTORY": (
        ("CONTAINERID", "TEXT"), ("WORKCENTERNAME", "TEXT"), ("EQUIPMENTID", "TEXT"),
        ("EQUIPMENTNAME", "TEXT"), ("SPECNAME", "TEXT"), ("TRACKINTIMESTAMP", "TEXT"),
        ("TRACKOUTTIMESTAMP", "TEXT"), ("TRACKINQTY", "NUMERIC"), ("TRACKOUTQTY", "NUMERIC"),
        ("FINISHEDRUNCARD", "TEXT"), ("PJ_WORKORDER", "TEXT"),
    ),
    "DW_MES_LOTMATERIALSHISTORY": (
        ("CONTAINERID", "TEXT"), ("MATERIALPARTNAME", "TEXT"), ("MATERIALLOTNAME", "TEXT"),
        ("QTYCONSUMED", "NUMERIC"), ("WORKCENTERNAME", "TEXT"), ("SPECNAME", "TEXT"),
        ("EQUIPMENTNAME", "TEXT"), ("TXNDATE", "TEXT"), ("DESCRIPTION", "TEXT"),
    ),
    "DW_MES_LOTREJECTHISTORY": (
        ("CONTAINERID", "TEXT"), ("WORKCENTERNAME", "TEXT"), ("SPECNAME", "TEXT"),
        ("LOSSREASONNAME", "TEXT"), ("EQUIPMENTNAME", "TEXT"), ("REJECTCOMMENT", "TEXT"),
        ("REJECTQTY", "NUMERIC"), ("STANDBYQTY", "NUMERIC"), ("QTYTOPROCESS", "NUMERIC"),
        ("INPROCESSQTY", "NUMERIC"), ("PROCESSEDQTY", "NUMERIC"), ("DEFECTQTY", "NUMERIC"),
        ("TXNDATE", "TEXT"),
    ),
    "DW_MES_HOLDRELEASEHISTORY": (
        ("CONTAINERID", "TEXT"), ("WORKCENTERNAME", "TEXT"), ("HOLDTXNDATE", "TEXT"),
        ("HOLDEMP", "TEXT"), ("HOLDEMPDEPTNAME", "TEXT"), ("HOLDREASONNAME", "TEXT"),
        ("HOLDCOMMENTS", "TEXT"), ("RELEASETXNDATE", "TEXT"), ("RELEASEEMP", "TEXT"),
        ("RELEASECOMMENTS", "TEXT"), ("NCRID", "TEXT"),
    ),
    "DW_MES_JOB": (
        ("JOBID", "TEXT"), ("RESOURCEID", "TEXT"), ("RESOURCENAME", "TEXT"), ("JOBSTATUS", "TEXT"),
        ("JOBMODELNAME", "TEXT"), ("JOBORDERNAME", "TEXT"), ("CREATEDATE", "TEXT"), ("COMPLETEDATE", "TEXT"),
        ("CAUSECODENAME", "TEXT"), ("REPAIRCODENAME", "TEXT"), ("SYMPTOMCODENAME", "TEXT"),
        ("CONTAINERIDS", "TEXT"), ("CONTAINERNAMES", "TEXT"),
    ),
    "DW_MES_PJ_COMBINEDASSYLOTS": (
        ("CONTAINERID", "TEXT"), ("CONTAINERNAME", "TEXT"), ("LOTID", "TEXT"), ("FINISHEDNAME", "TEXT"),
    ),
    # Reduced to what the MSD detection reads (the lot's workflow) and its indexed name.
    "DW_MES_WIP": (
        ("CONTAINERID", "TEXT"), ("CONTAINERNAME", "TEXT"), ("WORKFLOWNAME", "TEXT"),
        ("PRODUCTLINENAME", "TEXT"),
    ),
    # A view in the DWH (no index); its WORKCENTERSEQUENCE_GROUP is text ('090').
    "DW_MES_SPEC_WORKCENTER_V": (
        ("SPEC", "TEXT"), ("WORK_CENTER", "TEXT"), ("WORK_CENTER_GROUP", "TEXT"),
        ("WORKCENTERSEQUENCE_GROUP", "TEXT"),
    ),
    # The query-tool's status hours (resources.py); HISTORYID is the RESOURCEID.
    "DW_MES_RESOURCE": (("RESOURCEID", "TEXT"), ("RESOURCENAME", "TEXT")),
    "DW_MES_RESOURCESTATUS_SHIFT": (
        ("HISTORYID", "TEXT"), ("NEWSTATUSNAME", "TEXT"), ("TXNDATE", "TEXT"), ("HOURS", "NUMERIC"),
    ),
}

#: Indexes, created after the load: the real ones, under their real names.
INDEXES: tuple[str, ...] = (
    "CREATE UNIQUE INDEX DW_C_CONTAINERID ON DW_MES_CONTAINER (CONTAINERID)",
    "CREATE UNIQUE INDEX DW_C_CONTAINERNAME ON DW_MES_CONTAINER (CONTAINERNAME)",
    "CREATE INDEX DW_C_MFGORDERNAME ON DW_MES_CONTAINER (MFGORDERNAME)",
    "CREATE INDEX DW_MES_CONTAINER_PRODUCTLINENAME ON DW_MES_CONTAINER (PRODUCTLINENAME)",
    "CREATE INDEX DW_MES_LOTWIPHISTORY_IDX1 ON DW_MES_LOTWIPHISTORY (CONTAINERID)",
    "CREATE INDEX DW_MES_LOTWIPHISTORY_IDX3 ON DW_MES_LOTWIPHISTORY (TRACKINTIMESTAMP)",
    "CREATE INDEX DW_MES_LOTWIPHISTORY_IDX4 ON DW_MES_LOTWIPHISTORY (PJ_WORKORDER)",
    "CREATE INDEX DW_MES_LOTMATERIALSHISTORY_IDX1 ON DW_MES_LOTMATERIALSHISTORY (CONTAINERID)",
    "CREATE INDEX DW_MES_LOTMATERIALSHISTORY_IDX3 ON DW_MES_LOTMATERIALSHISTORY (MATERIALPARTNAME)",
    "CREATE INDEX DW_MES_LOTMATERIALSHISTORY_IDX4 ON DW_MES_LOTMATERIALSHISTORY (MATERIALLOTNAME)",
    "CREATE INDEX DW_MES_LOTREJECTHISTORY_IDX1 ON DW_MES_LOTREJECTHISTORY (CONTAINERID)",
    "CREATE INDEX DW_MES_LOTREJECTHISTORY_IDX4 ON DW_MES_LOTREJECTHISTORY (TXNDATE)",
    "CREATE INDEX DW_MES_HOLDRELEASEHISTORY_IDX2 ON DW_MES_HOLDRELEASEHISTORY (CONTAINERID)",
    "CREATE INDEX DW_MES_JOB_COMPLETEDATE ON DW_MES_JOB (COMPLETEDATE)",
    "CREATE INDEX DW_MES_JOB_CREATEDATE ON DW_MES_JOB (CREATEDATE)",
    "CREATE INDEX DW_MES_JOB_RESOURCEID ON DW_MES_JOB (RESOURCEID)",
    "CREATE INDEX DW_MES_JOB_RESOURCENAME ON DW_MES_JOB (RESOURCENAME)",
    "CREATE INDEX DW_MES_PJ_COMBINEDASSYLOTS_IDX1 ON DW_MES_PJ_COMBINEDASSYLOTS (CONTAINERID)",
    "CREATE INDEX DW_MES_PJ_COMBINEDASSYLOTS_IDX2 ON DW_MES_PJ_COMBINEDASSYLOTS (FINISHEDNAME)",
    "CREATE INDEX DW_MES_WIP_CONTAINERNAME ON DW_MES_WIP (CONTAINERNAME)",
    "CREATE INDEX RESOURCEID ON DW_MES_RESOURCE (RESOURCEID)",
    "CREATE INDEX DW_MES_RESOURCESTATUS_SHIFT_HISTORYID ON DW_MES_RESOURCESTATUS_SHIFT (HISTORYID)",
    "CREATE INDEX DW_MES_RESOURCESTATUS_SHIFT_TXNDATE ON DW_MES_RESOURCESTATUS_SHIFT (TXNDATE)",
)


def create_tables_sql() -> list[str]:
    """CREATE TABLE statements of every table, without indexes."""
    return [f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols)})"
            for name, cols in TABLES.items()]


def insert_sql(table: str) -> str:
    """The INSERT statement of one table, with one ``?`` per column."""
    cols = TABLES[table]
    return f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})"


#: PostgreSQL types of the same columns (``tracebus sample-data --to``): the real ones mapped
#: as CHAR(n)/VARCHAR2(n) -> varchar(n), DATE -> timestamp(0), NUMBER -> numeric (with its
#: precision and scale when the DWH gives them). Text columns sort by code point (COLLATE
#: "C", as SQLite's BINARY and Oracle's BINARY sort), whatever the database's locale.
PG_TYPES: dict[str, dict[str, str]] = {
    "DW_MES_CONTAINER": {"CONTAINERID": "varchar(16)", "CONTAINERNAME": "varchar(40)", "SPLITFROMID":
        "varchar(16)", "ORIGINALCONTAINERID": "varchar(16)", "FIRSTNAME": "varchar(40)", "MFGORDERNAME":
        "varchar(40)", "PJ_TYPE": "varchar(40)", "PJ_BOP": "varchar(40)", "PJ_FUNCTION": "varchar(40)",
        "PRODUCTNAME": "varchar(40)", "PRODUCTLINENAME": "varchar(40)", "OBJECTTYPE": "varchar(40)"},
    "DW_MES_LOTWIPHISTORY": {"CONTAINERID": "varchar(16)", "WORKCENTERNAME": "varchar(40)", "EQUIPMENTID":
        "varchar(16)", "EQUIPMENTNAME": "varchar(40)", "SPECNAME": "varchar(40)", "TRACKINTIMESTAMP":
        "timestamp(0)", "TRACKOUTTIMESTAMP": "timestamp(0)", "TRACKINQTY": "numeric", "TRACKOUTQTY":
        "numeric", "FINISHEDRUNCARD": "varchar(255)", "PJ_WORKORDER": "varchar(40)"},
    "DW_MES_LOTMATERIALSHISTORY": {"CONTAINERID": "varchar(16)", "MATERIALPARTNAME": "varchar(40)",
        "MATERIALLOTNAME": "varchar(40)", "QTYCONSUMED": "numeric", "WORKCENTERNAME": "varchar(40)",
        "SPECNAME": "varchar(40)", "EQUIPMENTNAME": "varchar(40)", "TXNDATE": "timestamp(0)", "DESCRIPTION":
        "varchar(255)"},
    "DW_MES_LOTREJECTHISTORY": {"CONTAINERID": "varchar(16)", "WORKCENTERNAME": "varchar(40)", "SPECNAME":
        "varchar(40)", "LOSSREASONNAME": "varchar(40)", "EQUIPMENTNAME": "varchar(255)", "REJECTCOMMENT":
        "varchar(255)", "REJECTQTY": "numeric", "STANDBYQTY": "numeric", "QTYTOPROCESS": "numeric",
        "INPROCESSQTY": "numeric", "PROCESSEDQTY": "numeric", "DEFECTQTY": "numeric", "TXNDATE":
        "timestamp(0)"},
    "DW_MES_HOLDRELEASEHISTORY": {"CONTAINERID": "varchar(16)", "WORKCENTERNAME": "varchar(40)",
        "HOLDTXNDATE": "timestamp(0)", "HOLDEMP": "varchar(40)", "HOLDEMPDEPTNAME": "varchar(100)",
        "HOLDREASONNAME": "varchar(40)", "HOLDCOMMENTS": "varchar(255)", "RELEASETXNDATE": "timestamp(0)",
        "RELEASEEMP": "varchar(40)", "RELEASECOMMENTS": "varchar(255)", "NCRID": "varchar(255)"},
    "DW_MES_JOB": {"JOBID": "varchar(16)", "RESOURCEID": "varchar(16)", "RESOURCENAME": "varchar(40)",
        "JOBSTATUS": "varchar(40)", "JOBMODELNAME": "varchar(40)", "JOBORDERNAME": "varchar(40)",
        "CREATEDATE": "timestamp(0)", "COMPLETEDATE": "timestamp(0)", "CAUSECODENAME": "varchar(40)",
        "REPAIRCODENAME": "varchar(40)", "SYMPTOMCODENAME": "varchar(40)", "CONTAINERIDS": "varchar(2000)",
        "CONTAINERNAMES": "varchar(2000)"},
    "DW_MES_PJ_COMBINEDASSYLOTS": {"CONTAINERID": "varchar(16)", "CONTAINERNAME": "varchar(40)", "LOTID":
        "varchar(16)", "FINISHEDNAME": "varchar(40)"},
    "DW_MES_WIP": {"CONTAINERID": "varchar(16)", "CONTAINERNAME": "varchar(40)", "WORKFLOWNAME":
        "varchar(40)", "PRODUCTLINENAME": "varchar(40)"},
    "DW_MES_SPEC_WORKCENTER_V": {"SPEC": "varchar(40)", "WORK_CENTER": "varchar(40)", "WORK_CENTER_GROUP":
        "varchar(40)", "WORKCENTERSEQUENCE_GROUP": "varchar(255)"},
    "DW_MES_RESOURCE": {"RESOURCEID": "varchar(16)", "RESOURCENAME": "varchar(40)"},
    "DW_MES_RESOURCESTATUS_SHIFT": {"HISTORYID": "varchar(16)", "NEWSTATUSNAME": "varchar(40)", "TXNDATE":
        "timestamp(0)", "HOURS": "numeric(12,6)"},
}


def create_tables_pg() -> list[str]:
    """PostgreSQL CREATE TABLE statements of every table, without indexes."""
    def column(table: str, name: str) -> str:
        kind = PG_TYPES[table][name]
        return f"{name} {kind}" + (' COLLATE "C"' if kind.startswith("varchar") else "")

    return [f"CREATE TABLE {name} ({', '.join(column(name, c) for c, _ in cols)})"
            for name, cols in TABLES.items()]
