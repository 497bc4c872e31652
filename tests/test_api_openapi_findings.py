"""What schemathesis found where the API and its OpenAPI document disagreed (issue 12), each
pinned here with the answer the document now states."""

from __future__ import annotations

import json

import pytest

from tests.api_support import api_broker, api_settings, body, idle_client, submit, trace_cids, user  # noqa: F401


@pytest.mark.parametrize("selected", [{"packages": 2.2e-313}, {"pj_types": "SOT-26"}, {"bops": [1, 2]}])
def test_a_selection_that_is_not_lists_of_strings_is_400_not_500(idle_client, selected):
    resp = idle_client.simulate_get("/api/mid-section-defect/container-filter-options",
                                    params={"selected": json.dumps(selected)})

    assert resp.status_code == 400, resp.text
    assert resp.json["error"]["code"] == "INVALID_PARAMS" and "list of strings" in resp.json["error"]["message"]


def test_limit_above_the_page_cap_is_400_for_the_whole_result_too(idle_client, trace_cids, api_settings):
    job = submit(idle_client, trace_cids[:300])

    resp = idle_client.simulate_get(f"/api/trace/job/{job}/result",
                                    params={"limit": api_settings.api_max_page_rows + 1})

    assert resp.status_code == 400 and "limit" in resp.json["error"]["message"]


@pytest.mark.parametrize("params", [False, 0, "", [], "x"])
def test_trace_params_must_be_an_object_or_null(idle_client, trace_cids, params):
    resp = idle_client.simulate_post("/api/trace/events", json=body(trace_cids[:5], params=params))

    assert resp.status_code == 400 and "params" in resp.json["error"]["message"]


@pytest.mark.parametrize("direction, status", [({}, 400), (5, 400), ("sideways", 400), (None, 200), ("", 200)])
def test_a_lineage_direction_is_backward_forward_or_absent(idle_client, trace_cids, direction, status):
    resp = idle_client.simulate_post("/api/trace/lineage", json={
        "profile": "query_tool", "container_ids": trace_cids[:2], "params": {"direction": direction}})

    assert resp.status_code == status, resp.text


@pytest.mark.parametrize("value, status", [("1700000000000-0", 200), ("", 200), ("9" * 19 + "-0", 200),
                                           ("1" * 20 + "-0", 400), ("1700000000000", 400)])
def test_last_event_id_is_what_the_document_says(idle_client, trace_cids, value, status):
    job = submit(idle_client, trace_cids[:300])
    idle_client.simulate_post(f"/api/v1/jobs/{job}/cancel")  # final: the event stream ends at once

    resp = idle_client.simulate_get(f"/api/trace/job/{job}/events", headers={"Last-Event-ID": value})

    assert resp.status_code == status, resp.text[:300]


@pytest.mark.parametrize("params, status", [
    ({"loss_reasons": "x" * 129}, 400), ({"station": "x" * 65}, 400), ({"page": 2 ** 31}, 400),
    ({"order": "DESC"}, 410), ({"loss_reasons": "x" * 128, "station": "x" * 64}, 410)])
def test_msd_detail_parameters_are_bounded(idle_client, params, status):
    resp = idle_client.simulate_get("/api/mid-section-defect/analysis/detail",
                                    params={"trace_query_id": "msd-0000000000000000", **params})

    assert resp.status_code == status, resp.text
