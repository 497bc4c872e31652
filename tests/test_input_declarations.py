"""Every request input is declared once (tracebus.jobs.fields): the OpenAPI document's query
parameters and request bodies are the declarations' own, and the query strings check as the
routes always did (their messages)."""

from __future__ import annotations

import pytest

from api.openapi import document
from api.settings import ApiSettings
from tests.api_support import api_broker, api_settings, idle_client, user  # noqa: F401
from tracebus.errors import InvalidParams

#: A page cap other than the default: a bound taken from the settings must reach the document.
PAGE_ROWS = 777


@pytest.fixture(scope="module")
def doc() -> dict:
    settings = ApiSettings.from_env({"REDIS_URL": "redis://127.0.0.1:1/0", "TRACEBUS_API_MAX_PAGE_ROWS": str(PAGE_ROWS),
                                     "TRACE_EVENTS_CID_LIMIT": "4321"})
    return document(settings)


def _declared_queries() -> dict:
    from api.resources import dead_letters, generic, jobs, v1
    from tracebus.trace.msd.job import detailquery

    return {
        ("/api/mid-section-defect/analysis/detail", "get"): detailquery.DETAIL_QUERY,
        ("/api/mid-section-defect/export", "get"): detailquery.EXPORT_QUERY,
        ("/api/trace/job/{job_id}/result", "get"): jobs.RESULT_QUERY,
        ("/api/trace/job/{job_id}/stream", "get"): jobs.STREAM_QUERY,
        ("/api/v1/jobs", "get"): v1.LIST_QUERY,
        ("/api/v1/jobs/{job_id}/export", "get"): v1.EXPORT_QUERY,
        ("/api/job/{job_id}", "get"): generic.PREFIX_QUERY,
        ("/api/job/{job_id}/result", "get"): generic.PREFIX_QUERY,
        ("/api/v1/dead-letters", "get"): dead_letters.LIST_QUERY,
        ("/api/mid-section-defect/container-filter-options", "get"): _lookups().SELECTED_QUERY,
    }


def _lookups():
    from tracebus.trace.msd import lookups

    return lookups


def test_every_query_parameter_in_the_document_is_a_declarations(doc):
    """No bound, default or enum of a query parameter is written in api/openapi*.py: each
    operation's query parameters are exactly its declaration's, bounds from the settings too."""
    declared = _declared_queries()
    seen = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            query = [p for p in op.get("parameters", []) if p.get("in") == "query"]
            if not query:
                continue
            assert (path, method) in declared, f"{method} {path} documents a query string no declaration owns"
            assert query == declared[(path, method)].parameters({"page_rows": PAGE_ROWS}), (path, method)
            seen.add((path, method))
    assert seen == set(declared)
    params = doc["paths"]["/api/trace/job/{job_id}/result"]["get"]["parameters"]
    limit = next(p for p in params if p.get("name") == "limit")
    assert limit["schema"]["maximum"] == PAGE_ROWS
    # the path's job id: as long as the longest id (a kind of 40 characters), no longer
    from tracebus.jobs.ids import is_job_id
    job_id = next(p for p in params if p.get("name") == "job_id")
    longest = "k" * 40 + "-" + "0" * 24
    assert is_job_id(longest) and job_id["schema"]["maxLength"] == len(longest)


def _declared_bodies(doc) -> list[dict]:
    from api.resources import dead_letters, generic, v1
    from tracebus.trace import installed, query
    from tracebus.trace.stages.params import LINEAGE_REQUEST, SEED_REQUEST

    limits = {"cid_limit": 4321}
    return [installed.events_request_schema(limits), SEED_REQUEST.schema(limits), LINEAGE_REQUEST.schema(limits),
            generic.ABANDON_REQUEST.schema(), v1.submit_request().schema(), dead_letters.TARGETS_REQUEST.schema(),
            *(kind.schema() for kind in query.declared().values())]


def test_every_request_body_in_the_document_is_a_declarations(doc):
    """The request bodies are the declared shapes' schemas (the CID cap from the settings)."""
    schemas = doc["components"]["schemas"]
    declared = _declared_bodies(doc)
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            body = op.get("requestBody")
            if body is None:
                continue
            schema = body["content"]["application/json"]["schema"]
            if "$ref" in schema:
                schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
            assert schema in declared, f"{method} {path}: a request body no declaration owns"
    assert schemas["TraceRequest"]["properties"]["container_ids"]["maxItems"] == 4321


def test_msds_params_seeds_and_lineage_are_in_the_trace_request(doc):
    """MSD's part of an events request (its seeds, its lineage or the query id of one, its params) is
    documented under its profile, from its declaration."""
    from tracebus.trace.msd.job.plan import MSD_REQUEST, PROFILE
    from tracebus.trace.msd.params import MSD_PARAMS

    (rule,) = [r for r in doc["components"]["schemas"]["TraceRequest"]["allOf"]
               if r["if"]["properties"]["profile"] == {"const": PROFILE}]
    then = rule["then"]
    assert then == MSD_REQUEST.schema({"cid_limit": 4321})
    assert set(then["properties"]) == {"seed_container_ids", "lineage", "lineage_query_id", "params"}
    # the lineage handed over by its query id: what it does, said under the profile that reads it
    assert "lin-" in then["properties"]["lineage_query_id"]["description"]
    assert then["properties"]["seed_container_ids"]["maxItems"] == 4321
    assert set(then["properties"]["params"]["properties"]) == {f.name for f in MSD_PARAMS.fields}
    assert then["properties"]["params"]["properties"]["direction"]["enum"] == ["backward", "forward"]


def test_the_msd_request_checks_as_declared():
    from tracebus.trace.errors import CidLimitExceeded
    from tracebus.trace.msd.job import plan
    from tracebus.trace.msd.params import MsdParams

    body = {"profile": plan.PROFILE, "container_ids": ["a"], "domains": ["upstream_history"], "params": {}}
    assert MsdParams.from_params({"direction": "  "}).direction == "backward"
    assert MsdParams.from_params({"direction": " forward "}).direction == "forward"
    with pytest.raises(InvalidParams, match=r"^direction must be one of backward, forward, not 'up'$"):
        MsdParams.from_params({"direction": "up"})
    assert MsdParams.from_params({"loss_reasons": "a, b,a", "pj_types": "x"}).loss_reasons == ("a", "b")
    with pytest.raises(InvalidParams, match="^lineage must be an object$"):
        plan.parse({**body, "lineage": [1]}, ["upstream_history"], "u", {"cid_limit": 3})
    assert plan.parse({**body, "lineage": {}}, ["upstream_history"], "u", {"cid_limit": 3}).lineage is None
    assert plan.parse({**body, "params": {"mode": " container "}}, ["upstream_history"], "u",
                      {"cid_limit": 3}).container_mode
    with pytest.raises(CidLimitExceeded):
        plan.parse({**body, "seed_container_ids": list("abcd")}, ["upstream_history"], "u", {"cid_limit": 3})


def _read(declared, query: dict) -> dict:
    return declared.read(lambda name: [v for k, v in query.items() if k == name] if not isinstance(
        query.get(name), list) else query[name])


@pytest.mark.parametrize(("query", "message"), [
    ({}, "^trace_query_id is required$"),
    ({"trace_query_id": "  "}, "^trace_query_id is required$"),
    ({"trace_query_id": "msd-1", "page": "x"}, "^page must be an integer, got 'x'$"),
    ({"trace_query_id": "msd-1", "page": "0"}, f"^page must be from 1 to {2**31 - 1}, got 0$"),
    ({"trace_query_id": "msd-1", "page_size": "501"}, "^page_size must be an integer from 1 to 500, got 501$"),
    ({"trace_query_id": "msd-1", "page_size": "a"}, "^page_size must be an integer, got 'a'$"),
    ({"trace_query_id": "msd-1", "sort_by": "nope"}, "^sort_by must be one of .*, not 'nope'$"),
    ({"trace_query_id": "msd-1", "order": "UP"}, "^order must be asc or desc, not 'up'$"),
    ({"trace_query_id": "msd-1", "pj_types[]": ["x" * 129]}, "^pj_types: a value is longer than 128 characters$"),
    ({"trace_query_id": "msd-1", "station": "s" * 65},
     '^The "station" parameter is invalid. The value must be at most 64 characters.$'),
])
def test_the_msd_detail_query_keeps_its_messages(query, message):
    from tracebus.trace.msd.job.detailquery import DETAIL_QUERY

    with pytest.raises(InvalidParams, match=message):
        _read(DETAIL_QUERY, query)


def test_the_msd_detail_query_reads_as_before():
    from tracebus.trace.msd.job.detailquery import DETAIL_QUERY

    q = _read(DETAIL_QUERY, {"trace_query_id": " msd-1 ", "order": "ASC", "pj_types[]": ["a,b", " "],
                             "pj_types": ["c"], "page_size": "7"})
    assert q == {"trace_query_id": "msd-1", "loss_reasons": None, "start_date": None, "end_date": None,
                 "station": None, "direction": None, "pj_types": ["a", "b", "c"], "packages": None,
                 "page": 1, "page_size": 7, "sort_by": "defect_rate", "order": "asc"}


def test_the_api_query_strings_keep_falcons_messages():
    """What falcon's get_param_as_int / _as_bool answered before, the declarations answer now."""
    from api.resources import jobs, v1

    cases = [(v1.LIST_QUERY, {"limit": "0"}, '^The "limit" parameter is invalid. The value must be at least 1$'),
             (v1.LIST_QUERY, {"limit": "1001"}, '^The "limit" parameter is invalid. The value may not exceed 1000$'),
             (v1.LIST_QUERY, {"offset": "x"}, '^The "offset" parameter is invalid. The value must be an integer.$'),
             (v1.LIST_QUERY, {"status": "sleeping"}, "^status must be one of .*, got 'sleeping'$"),
             (v1.EXPORT_QUERY, {"format": "xlsx"}, "^format must be one of parquet, arrow, csv, got 'xlsx'$"),
             (jobs.STREAM_QUERY, {"follow": "maybe"},
              '^The "follow" parameter is invalid. The value of the parameter must be "true" or "false".$')]
    for declared, query, message in cases:
        with pytest.raises(InvalidParams, match=message):
            declared.read(lambda name, q=query: [q[name]] if name in q else [])
    assert jobs.RESULT_QUERY.read(lambda name: {"limit": ["3"], "follow": ["yes"]}.get(name, []),
                                  {"page_rows": 5}) == {"domain": None, "offset": 0, "limit": 3, "partial": False,
                                                        "follow": True}
    with pytest.raises(InvalidParams, match=r"^The \"limit\" parameter is invalid. The value must be at most 5 \(or 0"):
        jobs.RESULT_QUERY.read(lambda name: {"limit": ["6"]}.get(name, []), {"page_rows": 5})


def test_a_blank_flag_is_true_as_falcon_read_it(idle_client):
    """``?follow`` and ``?follow=`` were true (falcon's get_param_as_bool: blank_as_true); the
    declared flags read them so too, not as a 400."""
    from api.resources import jobs

    for given in ([""], ["yes"]):
        assert jobs.STREAM_QUERY.read(lambda name, g=given: g if name == "follow" else [])["follow"] is True
        assert jobs.RESULT_QUERY.read(lambda name, g=given: g if name == "partial" else [],
                                      {"page_rows": 5})["partial"] is True
    for query_string in ("follow", "follow="):  # a job id of no job: past the query string, 404 not 400
        answer = idle_client.simulate_get("/api/trace/job/trace-evt-000000000000000000000000/stream",
                                          query_string=query_string)
        assert answer.status_code == 404, answer.text
