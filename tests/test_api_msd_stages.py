"""The MSD page's first stages and lookups over HTTP (issue 10, items 2 and 6).

``POST /api/trace/seed-resolve`` and ``POST /api/trace/lineage`` through the Falcon TestClient
on the scale-0.01 sample, checked against SQL written here; every bad input is a 400 (or the
original's 404 hint) with a message naming what is wrong; the lookups keep the original's
envelope whatever ``TRACEBUS_API_ENVELOPE`` says. Every stage here is below its async threshold
(:data:`SYNC`); the jobs of large ones, and a run through a real gunicorn, are in
test_api_stage_jobs.py.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from api.openapi import document
from tests.api_support import api_broker, api_settings, make_client, user  # noqa: F401
from tests.test_api_openapi import conforms
from tracebus.trace.lineage_cache import LineageCache
from tracebus.trace.sources.lineage import LineageReads
from tracebus.trace.sources.sqlite import SqliteSource

START, END = "2025-01-01", "2025-03-31"
MSD = "mid_section_defect"


#: Settings that keep every stage of this module synchronous (the jobs: test_api_stage_jobs.py).
SYNC = {"seed_async_days": 180, "async_cid_threshold": 200_000, "seed_sync_max_patterns": 100}


@pytest.fixture
def client(api_settings, api_broker, user):
    return make_client(api_settings, api_broker, user, **SYNC)


def seed_body(**params) -> dict:
    return {"profile": MSD, "params": {"mode": "date_range", "station": "測試", "start_date": START,
                                       "end_date": END, **params}}


def seeds_by_sql(db, start: str, end: str) -> set[str]:
    """The original's rule, in plain SQL: a track-in at a 測試/TMTT workcenter in the window, with equipment."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT DISTINCT CONTAINERID FROM DW_MES_LOTWIPHISTORY WHERE TRACKINTIMESTAMP >= ? AND "
            "TRACKINTIMESTAMP < date(?, '+1 day') AND EQUIPMENTID IS NOT NULL AND "
            "(INSTR(UPPER(WORKCENTERNAME), '測試') > 0 OR INSTR(UPPER(WORKCENTERNAME), 'TMTT') > 0)",
            (start, end)).fetchall()
    return {r[0] for r in rows}


def test_a_date_range_resolves_the_seeds_that_plain_sql_finds(client, sample_db):
    resp = client.simulate_post("/api/trace/seed-resolve", json=seed_body())

    answer = resp.json
    expected = seeds_by_sql(sample_db, START, END)
    assert resp.status_code == 200 and answer["stage"] == "seed-resolve"
    assert answer["seed_count"] == len(expected) == len(answer["seed_container_ids"]) > 50
    assert set(answer["seed_container_ids"]) == expected
    assert answer["cache_key"].startswith("trace:seed:mid_section_defect:") and answer["query_id"].startswith("seed-")
    assert "seeds" not in answer  # date mode lists ids only, as the original


def test_the_seed_ids_ignore_the_read_time_masks_but_not_the_window(client):
    plain = client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json
    masked = client.simulate_post("/api/trace/seed-resolve",
                                  json=seed_body(loss_reasons=["x"], pj_types=["y"], packages=["z"])).json
    shorter = client.simulate_post("/api/trace/seed-resolve", json=seed_body(end_date="2025-02-28")).json

    assert (masked["query_id"], masked["cache_key"]) == (plain["query_id"], plain["cache_key"])
    assert shorter["query_id"] != plain["query_id"] and shorter["seed_count"] < plain["seed_count"]


def test_a_date_range_without_seeds_is_the_originals_empty_answer(client):
    resp = client.simulate_post("/api/trace/seed-resolve",
                                json=seed_body(start_date="2019-01-01", end_date="2019-01-31"))

    assert resp.status_code == 200
    assert (resp.json["seed_count"], resp.json["seed_container_ids"]) == (0, [])


def test_container_mode_resolves_typed_lot_names_at_the_station(client, sample_db):
    with sqlite3.connect(sample_db) as conn:
        expected = sorted(seeds_by_sql(sample_db, START, END))[:3]
        names = [conn.execute("SELECT CONTAINERNAME FROM DW_MES_CONTAINER WHERE CONTAINERID = ?", (c,)).fetchone()[0]
                 for c in expected]

    resp = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "lot_id", "values": names + ["  ", names[0]]}})

    assert resp.status_code == 200, resp.text
    assert set(resp.json["seed_container_ids"]) == set(expected) and resp.json["seed_count"] == 3
    assert {(s["container_id"], s["lot_id"]) for s in resp.json["seeds"]} == set(zip(expected, names))


def test_container_mode_that_finds_nothing_gives_the_originals_hint(client):
    resp = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "lot_id", "values": ["NO-SUCH-LOT"]}})

    assert resp.status_code == 404
    assert resp.json["error"]["code"] == "NO_DETECTION_RECORDS"
    assert "無歷史記錄" in resp.json["error"]["message"] and "測試" in resp.json["error"]["message"]


#: station_seed_by_filter.sql: the containers whose column holds the value and that have a
#: track-in with equipment at a 測試/TMTT workcenter.
AT_STATION_SQL = """
SELECT DISTINCT h.CONTAINERID FROM DW_MES_LOTWIPHISTORY h JOIN DW_MES_CONTAINER c ON c.CONTAINERID = h.CONTAINERID
WHERE c.{column} = :v AND h.EQUIPMENTID IS NOT NULL AND h.TRACKINTIMESTAMP IS NOT NULL
  AND (INSTR(UPPER(h.WORKCENTERNAME), '測試') > 0 OR INSTR(UPPER(h.WORKCENTERNAME), 'TMTT') > 0)
"""


@pytest.mark.parametrize("resolve_type, column, prefix", [
    ("work_order", "MFGORDERNAME", "WO"), ("wafer_lot", "FIRSTNAME", ""),
    ("gd_work_order", "MFGORDERNAME", ""),  # the sample has no GD work order: the same column, any value
    ("gd_lot_id", "CONTAINERNAME", "GD")])
def test_every_other_container_mode_of_the_filter_bar_resolves_at_the_station(client, sample_db, resolve_type,
                                                                             column, prefix):
    """FilterBar.vue's 工單 / WAFER LOT / GD 工單 / GD LOT ID (LOT is the lot_id test above)."""
    with sqlite3.connect(sample_db) as conn:
        for (value,) in conn.execute(f"SELECT DISTINCT {column} FROM DW_MES_CONTAINER WHERE {column} LIKE ? "
                                     f"ORDER BY {column}", (prefix + "%",)).fetchall():
            expected = {r[0] for r in conn.execute(AT_STATION_SQL.format(column=column), {"v": value})}
            if expected:
                break

    resp = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": resolve_type, "values": [value]}})

    assert resp.status_code == 200, resp.text
    assert set(resp.json["seed_container_ids"]) == expected and resp.json["seed_count"] == len(expected) > 0
    assert "not_found" not in resp.json


#: The original's serial-number resolver (query_tool_service._resolve_by_serial_number) as one
#: statement: a combined lot's FINISHEDNAME (best), a LOT's CONTAINERNAME, a LOT's FIRSTNAME;
#: a token with '*' matches as a GLOB (case-sensitive, as Oracle's LIKE).
SERIAL_SQL = """
WITH m AS (
  SELECT p.CONTAINERID AS cid, p.FINISHEDNAME AS v, c.CONTAINERNAME AS name, 0 AS pr
  FROM DW_MES_PJ_COMBINEDASSYLOTS p LEFT JOIN DW_MES_CONTAINER c ON c.CONTAINERID = p.CONTAINERID
  UNION ALL SELECT CONTAINERID, CONTAINERNAME, CONTAINERNAME, 1 FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT'
  UNION ALL SELECT CONTAINERID, FIRSTNAME, CONTAINERNAME, 2 FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT')
SELECT cid, COALESCE(name, cid), MIN(pr) FROM m WHERE (v = :t OR (INSTR(:t, '*') > 0 AND v GLOB :t))
GROUP BY cid ORDER BY MIN(pr), COALESCE(name, cid)
"""


def test_container_mode_serial_number_resolves_through_the_lot_resolver_at_any_station(client, sample_db):
    """FilterBar.vue's 成品流水號: finished serials, lot names and wafer lots, patterns too."""
    with sqlite3.connect(sample_db) as conn:
        finished = conn.execute("SELECT FINISHEDNAME FROM DW_MES_PJ_COMBINEDASSYLOTS WHERE FINISHEDNAME IS NOT NULL "
                                "ORDER BY FINISHEDNAME").fetchone()[0]
        lot, wafer = conn.execute("SELECT CONTAINERNAME, FIRSTNAME FROM DW_MES_CONTAINER WHERE OBJECTTYPE = 'LOT' "
                                  "AND CONTAINERNAME <> FIRSTNAME ORDER BY CONTAINERNAME LIMIT 1 OFFSET 7").fetchone()
        tokens = [finished, lot, wafer, finished[:8] + "*", "NO-SUCH-SERIAL"]
        expected = [conn.execute(SERIAL_SQL, {"t": t}).fetchall() for t in tokens]
    assert all(expected[:4]) and not expected[4] and len(expected[2]) > 1 and len(expected[3]) > 1

    resp = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "serial_number", "values": tokens + [" ", lot], "station": "切割"}})

    assert resp.status_code == 200, resp.text
    answer, order = resp.json, list(dict.fromkeys((cid, name) for rows in expected for cid, name, _ in rows))
    assert [(s["container_id"], s["lot_id"]) for s in answer["seeds"]] == order
    assert answer["seed_container_ids"] == [cid for cid, _ in order] and answer["seed_count"] == len(order)
    assert all(s["container_name"] == s["lot_id"] for s in answer["seeds"])
    assert answer["not_found"] == ["NO-SUCH-SERIAL"]

    resp = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "serial_number", "values": ["NO-SUCH-SERIAL", "NONE*"]}})
    assert resp.status_code == 404 and resp.json["error"]["code"] == "NO_DETECTION_RECORDS"
    assert "找不到符合條件的容器" in resp.json["error"]["message"]


@pytest.mark.parametrize("body, code, words", [
    ([1, 2], "INVALID_PARAMS", "JSON object"),
    ({"profile": "query_tool", "params": {}}, "INVALID_PROFILE", "mid_section_defect"),
    ({"profile": MSD, "params": "x"}, "INVALID_PARAMS", "params must be an object"),
    (seed_body(mode="weekly"), "INVALID_PARAMS", "mode must be one of"),
    (seed_body(station="NOWHERE"), "INVALID_PARAMS", "unknown station 'NOWHERE'"),
    (seed_body(direction="sideways"), "INVALID_PARAMS", "direction must be one of"),
    (seed_body(start_date="2025-03-01", end_date="2025-01-01"), "INVALID_PARAMS", "is after end_date"),
    (seed_body(start_date="2023-01-01", end_date="2025-12-31"), "INVALID_PARAMS", "at most 730"),
    (seed_body(start_date="2025-13-01"), "INVALID_PARAMS", "YYYY-MM-DD"),
    (seed_body(start_date="", end_date=""), "INVALID_PARAMS", "start_date and end_date"),
    ({"profile": MSD, "params": {"mode": "container", "resolve_type": "serial", "values": ["a"]}},
     "INVALID_PARAMS", "resolve_type must be one of"),
    ({"profile": MSD, "params": {"mode": "container", "resolve_type": "lot_id", "values": []}},
     "INVALID_PARAMS", "at least one query value"),
    ({"profile": MSD, "params": {"mode": "container", "resolve_type": "lot_id", "values": "abc"}},
     "INVALID_PARAMS", "values must be a list"),
])
def test_each_bad_seed_request_is_a_400_that_says_what_is_wrong(client, body, code, words):
    resp = client.simulate_post("/api/trace/seed-resolve", json=body)

    assert resp.status_code == 400, resp.text
    assert resp.json["error"]["code"] == code and words in resp.json["error"]["message"], resp.json


def test_a_body_that_is_not_json_is_a_400(client):
    resp = client.simulate_post("/api/trace/seed-resolve", body=b"{nope", headers={"Content-Type": "application/json"})

    assert resp.status_code == 400 and "not valid JSON" in resp.json["error"]["message"]


def test_the_lineage_is_answered_compact_and_stored_whole_under_its_query_id(client, api_settings,
                                                                             api_broker, sample_db):
    seeds = client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json["seed_container_ids"]

    resp = client.simulate_post("/api/trace/lineage", json={"profile": MSD, "container_ids": seeds,
                                                            "params": {"direction": "backward"}})

    answer = resp.json
    source = SqliteSource(sample_db)
    try:
        direct = LineageReads(source).lineage_backward(seeds).to_dict()
    finally:
        source.close()
    stored = LineageCache(api_broker.client, api_settings.key_prefix, api_settings.job_ttl_s).get(answer["query_id"])
    assert resp.status_code == 200 and answer["stage"] == "lineage"
    assert answer["query_id"] == answer["trace_lineage_query_id"] and answer["query_id"].startswith("lin-")
    assert (answer["total_nodes"], answer["total_ancestor_count"]) == (direct["total_nodes"],
                                                                       direct["total_ancestor_count"])
    assert answer["total_ancestor_count"] > 0 and answer["seed_roots"] == direct["seed_roots"]
    assert "ancestors" not in answer  # the page reads the lineage through the events stage
    assert stored["direction"] == "backward" and stored["seeds"] == seeds
    assert stored["ancestors"] == direct["ancestors"] and stored["names"] == direct["names"]
    ttl = api_broker.client.ttl(f"{api_settings.key_prefix}:trace:lineage:{answer['query_id']}")
    assert 0 < ttl <= api_settings.job_ttl_s


def test_a_forward_lineage_and_a_query_tool_lineage_answer_their_whole_shape(client, api_settings,
                                                                              api_broker, sample_db):
    seeds = client.simulate_post("/api/trace/seed-resolve",
                                 json=seed_body(station="焊接_DB")).json["seed_container_ids"][:40]

    forward = client.simulate_post("/api/trace/lineage", json={
        "profile": MSD, "container_ids": seeds, "params": {"direction": "forward"}}).json
    whole = client.simulate_post("/api/trace/lineage", json={
        "profile": "query_tool", "container_ids": seeds, "params": {"direction": "forward"}}).json

    cache = LineageCache(api_broker.client, api_settings.key_prefix, api_settings.job_ttl_s)
    # The query-tool tree is the original's resolve_forward_tree (tests/test_lineage_trees.py),
    # another answer than the MSD forward lineage of the same seeds: stored apart.
    assert forward["query_id"] != whole["query_id"]
    assert cache.get(forward["query_id"])["direction"] == "forward" and "children_map" not in forward
    assert cache.get(whole["query_id"])["profile"] == "query_tool" and "profile" not in whole
    assert whole["stage"] == "lineage" and whole["children_map"] and whole["total_nodes"] > len(seeds)


@pytest.mark.parametrize("body, status, words", [
    ({"profile": MSD, "container_ids": []}, 400, "at least one id"),
    ({"profile": MSD, "container_ids": "abc"}, 400, "container_ids must be a list"),
    ({"profile": "nope", "container_ids": ["a"]}, 400, "unknown profile"),
    ({"profile": MSD, "container_ids": ["a"], "params": {"direction": "up"}}, 400, "direction must be one of"),
    ({"profile": MSD, "container_ids": ["a"], "params": [1]}, 400, "params must be an object"),
    ({"profile": MSD, "container_ids": ["x" * 65]}, 400, "longer than 64"),
])
def test_each_bad_lineage_request_is_a_400_that_says_what_is_wrong(client, body, status, words):
    resp = client.simulate_post("/api/trace/lineage", json=body)

    assert resp.status_code == status and words in resp.json["error"]["message"], resp.json


def test_more_seeds_than_the_cid_limit_is_a_413(api_settings, api_broker, user):
    client = make_client(api_settings, api_broker, user, events_cid_limit=5, **SYNC)

    resp = client.simulate_post("/api/trace/lineage", json={"profile": MSD, "container_ids": list("abcdef")})

    assert resp.status_code == 413 and resp.json["error"]["code"] == "CID_LIMIT_EXCEEDED"


def test_the_lookups_keep_the_originals_envelope_with_the_option_off(client, sample_db):
    stations = client.simulate_get("/api/mid-section-defect/station-options").json
    reasons = client.simulate_get("/api/mid-section-defect/loss-reasons").json
    options = client.simulate_get("/api/mid-section-defect/container-filter-options").json

    with sqlite3.connect(sample_db) as conn:
        expected = [r[0] for r in conn.execute("SELECT DISTINCT LOSSREASONNAME FROM DW_MES_LOTREJECTHISTORY "
                                               "WHERE LOSSREASONNAME IS NOT NULL ORDER BY 1")]
    assert all(a["success"] is True and {"timestamp", "app_version"} <= set(a["meta"])
               for a in (stations, reasons, options))
    assert [s["order"] for s in stations["data"]] == sorted(s["order"] for s in stations["data"])
    assert {"name": "測試", "label": "TMTT", "order": 11} in stations["data"]
    assert reasons["data"]["loss_reasons"] == expected and expected
    assert set(options["data"]) == {"pj_types", "packages", "bops", "pj_functions"}
    assert all(options["data"][k] for k in options["data"])
    assert options["meta"]["schema_version"] == 2 and options["meta"]["updated_at"].endswith("+00:00")


def test_the_filter_options_are_cross_filtered_by_the_selection(client):
    full = client.simulate_get("/api/mid-section-defect/container-filter-options").json["data"]
    pj_type = full["pj_types"][0]

    narrowed = client.simulate_get("/api/mid-section-defect/container-filter-options",
                                   params={"selected": json.dumps({"pj_types": [pj_type], "other": 1})}).json

    assert narrowed["success"] is True
    assert narrowed["data"]["pj_types"] == full["pj_types"]  # a dimension is not narrowed by itself
    assert set(narrowed["data"]["packages"]) < set(full["packages"])


@pytest.mark.parametrize("selected, words", [("{bad", "valid JSON"), ("[1, 2]", "JSON object")])
def test_a_malformed_selection_is_a_400_in_the_envelope(client, selected, words):
    resp = client.simulate_get("/api/mid-section-defect/container-filter-options", params={"selected": selected})

    assert resp.status_code == 400 and resp.json["success"] is False
    assert resp.json["error"]["code"] == "INVALID_PARAMS" and words in resp.json["error"]["message"]


def test_with_the_envelope_on_the_lookups_are_wrapped_once_and_the_stages_wrapped(api_settings, api_broker, user):
    client = make_client(api_settings, api_broker, user, api_envelope=1, **SYNC)

    options = client.simulate_get("/api/mid-section-defect/container-filter-options").json
    seeds = client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json

    assert options["success"] is True and "pj_types" in options["data"] and "schema_version" in options["meta"]
    assert seeds["success"] is True and seeds["data"]["stage"] == "seed-resolve"


def test_seed_resolve_and_lineage_are_rate_limited_per_caller(api_settings, api_broker, user):
    client = make_client(api_settings, api_broker, user, rate_limits="trace-seed=2/60,trace-lineage=1/60", **SYNC)

    seeds = [client.simulate_post("/api/trace/seed-resolve", json=seed_body()).status_code for _ in range(3)]
    lineage = [client.simulate_post("/api/trace/lineage", json={"profile": MSD, "container_ids": ["a"]}).status_code
               for _ in range(2)]

    assert seeds == [200, 200, 429] and lineage == [200, 429]


def test_real_stage_and_lookup_answers_conform_to_the_documented_schemas(client, api_settings):
    spec = document(api_settings)
    seed = client.simulate_post("/api/trace/seed-resolve", json=seed_body()).json
    container = client.simulate_post("/api/trace/seed-resolve", json={"profile": MSD, "params": {
        "mode": "container", "resolve_type": "lot_id", "values": ["NO-SUCH-LOT"]}}).json
    lineage = client.simulate_post("/api/trace/lineage", json={"profile": MSD,
                                                               "container_ids": seed["seed_container_ids"]}).json
    whole = client.simulate_post("/api/trace/lineage", json={"profile": "query_tool",
                                                             "container_ids": seed["seed_container_ids"][:5]}).json

    conforms(spec, "SeedResult", seed)
    conforms(spec, "Error", container)
    conforms(spec, "LineageResult", lineage)
    conforms(spec, "LineageResult", whole)
    for path, schema in (("station-options", "StationOptions"), ("loss-reasons", "LossReasons"),
                         ("container-filter-options", "FilterOptions")):
        conforms(spec, schema, client.simulate_get(f"/api/mid-section-defect/{path}").json)
    conforms(spec, "Error", client.simulate_get("/api/mid-section-defect/container-filter-options",
                                                params={"selected": "{"}).json)
