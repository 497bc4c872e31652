"""Domains, profiles and workcenter groups: the pure data every source and request relies on."""

from __future__ import annotations

import sqlite3

import pytest

from tracebus.errors import InvalidParams
from tracebus.trace.errors import InvalidProfile
from tracebus.trace import domains, installed  # noqa: F401  (the kinds declare the profiles)
from tracebus.trace.sources.queries import SQLITE, group_case
from tracebus.trace.synth.vocab import WORKCENTERS


def test_columns_are_the_oracle_columns_in_order():
    assert domains.columns("history")[:3] == ("CONTAINERID", "WORKCENTERNAME", "EQUIPMENTID")
    assert domains.columns("history")[-1] == "WAFER_LOT_ID"
    assert domains.columns("jobs")[-3:] == ("CONTAINERIDS", "CONTAINERNAMES", "CONTAINERID")
    assert domains.columns("downstream_rejects") == (
        "CONTAINERID", "WORKCENTERNAME", "WORKCENTER_GROUP", "LOSSREASONNAME", "EQUIPMENTNAME",
        "REJECT_TOTAL_QTY", "TXNDATE")
    assert len(domains.columns("rejects")) == 23
    assert set(domains.DOMAINS) == {"history", "materials", "rejects", "holds", "jobs",
                                    "upstream_history", "downstream_rejects"}
    for cols in domains.COLUMNS.values():
        assert len(cols) == len(set(cols))


def test_unknown_domain_is_invalid_params():
    with pytest.raises(InvalidParams, match="unknown domain 'bogus'"):
        domains.columns("bogus")


def test_profiles_allow_their_domains_only():
    assert domains.allowed_domains("query_tool") == ("history", "materials", "rejects", "holds", "jobs")
    assert domains.allowed_domains("mid_section_defect") == (
        "upstream_history", "materials", "downstream_rejects")
    assert domains.allowed_domains("query_tool_reverse") == domains.DOMAINS
    with pytest.raises(InvalidProfile):
        domains.allowed_domains("nope")


def test_validate_dedups_and_rejects_what_the_profile_forbids():
    assert domains.validate("query_tool", ["history", "jobs", "history"]) == ["history", "jobs"]
    with pytest.raises(InvalidProfile, match="does not allow domain 'history'"):
        domains.validate("mid_section_defect", ["history"])
    with pytest.raises(InvalidParams, match="unknown domain"):
        domains.validate("query_tool_reverse", ["histories"])
    with pytest.raises(InvalidParams, match="at least one"):
        domains.validate("query_tool", [])
    with pytest.raises(InvalidParams, match="not a string"):
        domains.validate("query_tool", "history")


@pytest.mark.parametrize("workcenter, group", [
    ("切割_WS1", "切割"), ("元件切割", "元件切割"), ("PKG_SAW", "元件切割"), ("pkg_saw-2", "元件切割"),
    ("焊接_DB2", "焊接_DB"), ("焊接_WB_CU", "焊接_WB"), ("焊接_DW", "焊接_DW"), ("成型_AUTO", "成型"),
    ("滾鍍", "電鍍"), ("電鍍_掛鍍", "電鍍"), ("LINE-bandl", "電鍍"), ("TMTT", "測試"), ("tmtt-2", "測試"),
    ("測試_FT", "測試"), ("晶圓入庫", None), ("", None), (None, None),
])
def test_workcenter_group_follows_the_ordered_keyword_table(workcenter, group):
    found = domains.workcenter_group(workcenter)
    assert (found.name if found else None) == group


def test_station_names_resolve_to_groups():
    assert domains.station_group("TMTT") == domains.station_group("測試") == domains.WORKCENTER_GROUPS[11]
    assert domains.station_group("tmtt").name == "測試"
    assert domains.station_group("X-RAY").order == domains.NO_SEQUENCE


def test_sql_case_agrees_with_the_python_table():
    names = [wc for wcs in WORKCENTERS.values() for wc in wcs] + ["pkg_saw", "tmtt", "x切割y", "QC"]
    conn = sqlite3.connect(":memory:")
    for name in names:
        (sql_group,) = conn.execute(f"SELECT {group_case(SQLITE, 'w')} FROM (SELECT ? AS w)", (name,)).fetchone()
        py_group = domains.workcenter_group(name)
        assert sql_group == (py_group.name if py_group else None), name
