"""A declared query kind's HTTP side comes from its declaration alone (issue 37, item 1).

The kind of tests/sample_query_kind.py (one file), once registered, is served on the route it
declares (answered now under its ``async_days``, a job from there), rate-limited in the bucket it
declares with the default it declares, and documented in /openapi.json, with no other change:
real redis-server, the sample SQLite database, the Falcon TestClient over ``create_app``.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sqlite3

import pytest

from tests.api_support import api_broker, api_settings, make_client, user  # noqa: F401
from tests.sample_query_kind import SAMPLE
from tracebus.errors import ConfigError
from tracebus.trace.query import KINDS, declare

PATH = "/api/sample/job-ids"


@pytest.fixture
def sample_kind():
    declare(SAMPLE)  # the registration a module of tracebus/trace/query/ makes on import
    yield SAMPLE
    del KINDS[SAMPLE.kind]


@pytest.fixture(scope="module")
def equipment(sample_db) -> tuple[list[str], str]:
    """Three resources of DW_MES_JOB and their busiest day."""
    with sqlite3.connect(sample_db) as db:
        ids = [r[0] for r in db.execute("SELECT RESOURCEID FROM DW_MES_JOB GROUP BY RESOURCEID "
                                        "ORDER BY count(*) DESC, RESOURCEID LIMIT 3")]
        day = db.execute(f"SELECT substr(CREATEDATE, 1, 10) AS d FROM DW_MES_JOB WHERE RESOURCEID IN "
                         f"({', '.join('?' * len(ids))}) GROUP BY d ORDER BY count(*) DESC LIMIT 1", ids).fetchone()[0]
        expected = [r[0] for r in db.execute(
            f"SELECT JOBID FROM DW_MES_JOB WHERE substr(CREATEDATE, 1, 10) = ? AND RESOURCEID IN "
            f"({', '.join('?' * len(ids))}) ORDER BY JOBID", [day, *ids])]
    assert expected
    return ids, day, expected


def body(ids, start, end) -> dict:
    return {"start_date": start, "end_date": end, "query_type": "job_ids", "equipment_ids": ids}


def test_a_registered_kind_is_served_limited_and_documented_from_its_declaration(
        sample_kind, api_settings, api_broker, user, equipment):
    ids, day, expected = equipment
    # Every bucket at its default (the suite's settings turn them off): the kind's is 2 a minute.
    client = make_client(api_settings, api_broker, user, rate_limits="", queue="idle-queue")

    now = client.simulate_post(PATH, json=body(ids, day, day))
    assert now.status_code == 200, now.text
    data = now.json["data"]  # always in the original's envelope
    assert now.json["success"] is True and [r["JOBID"] for r in data["data"]] == expected
    assert data["total"] == len(expected) and data["date_range"] == {"start": day, "end": day}

    bad = client.simulate_post(PATH, json={**body(ids, day, day), "equipment_ids": []})
    assert bad.status_code == 400 and "equipment, please" in bad.text

    limited = client.simulate_post(PATH, json=body(ids, day, day))
    assert limited.status_code == 429 and "sample-jobs allows 2 requests per 60 s" in limited.text
    assert int(limited.headers["Retry-After"]) >= 1

    doc = client.simulate_get("/openapi.json").json
    post = doc["paths"][PATH]["post"]
    assert post["summary"] == "A sample kind's job ids: under 7 days answered now, else a job (always enveloped)"
    assert post["requestBody"]["content"]["application/json"]["schema"] == SAMPLE.schema()
    assert "poll status_url (/api/job/{id}?prefix=sample-jobs)" in post["responses"]["202"]["description"]


def test_a_span_of_its_async_days_is_a_job_of_the_kind(sample_kind, api_settings, api_broker, user, equipment):
    ids, day, _ = equipment
    client = make_client(api_settings, api_broker, user, queue="idle-queue")  # no worker: it stays queued
    end = (datetime.date.fromisoformat(day) + datetime.timedelta(days=SAMPLE.async_days)).isoformat()

    job = client.simulate_post(PATH, json=body(ids, day, end))
    assert job.status_code == 202, job.text
    answer = job.json["data"]
    assert answer["async"] is True and answer["kind"] == "sample-jobs" and answer["job_id"].startswith("sample-jobs-")
    assert job.headers["Location"] == answer["status_url"] == f"/api/job/{answer['job_id']}?prefix=sample-jobs"
    status = client.simulate_get(answer["status_url"])
    assert status.status_code == 200 and status.json["data"]["status"] in ("queued", "running"), status.text


def test_an_unregistered_kind_has_no_route_bucket_or_document(api_settings, api_broker, user):
    client = make_client(api_settings, api_broker, user, rate_limits="")

    assert client.simulate_post(PATH, json={}).status_code == 404
    assert PATH not in client.simulate_get("/openapi.json").json["paths"]
    with pytest.raises(ConfigError, match="unknown bucket 'sample-jobs'"):
        make_client(api_settings, api_broker, user, rate_limits="sample-jobs=1/60")


@pytest.mark.parametrize("change, words", [
    ({"path": "/api/query-tool/equipment-period"}, "route /api/query-tool/equipment-period is declared by query-tool "
                                                   "and sample-jobs"),
    ({"bucket": "query-tool-equipment"}, "bucket 'query-tool-equipment' is declared with two defaults"),
    ({"bucket": "jobs-submit", "limit": (15, 60)}, "declares the API's own rate-limit bucket jobs-submit"),
])
def test_a_route_that_clashes_with_another_is_refused_when_the_app_is_built(api_settings, api_broker, change, words):
    clash = dataclasses.replace(SAMPLE, http=dataclasses.replace(SAMPLE.http, **change))
    declare(clash)
    try:
        with pytest.raises(ValueError, match=re.escape(words)):
            make_client(api_settings, api_broker)
    finally:
        del KINDS[clash.kind]
