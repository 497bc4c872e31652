"""Job kinds (issue 27, item 1): the service and the writers dispatch through a job's kind.

A kind that exists only in the tests (tests/kind_echo.py: a module and a registration) is
served end to end by the code that serves the real kinds, unchanged: a real redis-server, a
real ``tracebus worker tracebus.trace.tasks tests.kind_echo`` supervisor, the Falcon app. Its
request goes through ``POST /api/trace/events``, its units run in the workers, and its status,
NDJSON and binary streams, full result, typed export, listing and generic-contract answer are
the kind's (its status carries ``rendered_by``; its export types ``LENGTH`` as an integer).
"""

from __future__ import annotations

import io

import orjson
import pyarrow.parquet as pq
import pytest

from tests import kind_echo
from tests.api_support import (api_broker, api_settings, make_client, registered_workers,  # noqa: F401
                               user, wait_job)
from tracebus.jobs import wire
from tracebus.trace import kinds
from tracebus.trace.events.kind import EVENTS
from tracebus.trace.msd.kind import MSD

CIDS = [f"ECHO-{i:03d}" for i in range(7)]  # 4 units of 2 CIDs (the last one 1)


@pytest.fixture(scope="module")
def echo_workers(api_settings, api_broker, tmp_path_factory):
    """A real supervisor whose workers import the trace kinds and the test's kind."""
    yield from registered_workers(api_settings, api_broker, tmp_path_factory,
                                  modules=("tracebus.trace.tasks", "tests.kind_echo"))


@pytest.fixture(scope="module")
def echo_job(api_settings, api_broker, echo_workers):
    client = make_client(api_settings, api_broker, "echo-user")
    resp = client.simulate_post("/api/trace/events", json={"profile": kind_echo.PROFILE, "container_ids": CIDS,
                                                           "domains": ["ignored"]})
    assert resp.status_code == 202, resp.text
    job_id = resp.json["job_id"]
    assert job_id.startswith("test-echo-")
    assert wait_job(client, job_id)["state"] == "completed"
    return client, job_id


def _expected_rows() -> list[dict]:
    return [{"CID": cid, "LENGTH": len(cid), "UNIT": i // 2} for i, cid in enumerate(CIDS)]


def test_a_kind_registered_outside_the_package_is_found_by_profile_and_by_its_jobs_actor():
    assert kinds.for_profile(kind_echo.PROFILE) is kind_echo.ECHO
    assert kinds.for_profile("mid_section_defect") is MSD
    assert kinds.for_profile("query_tool") is EVENTS and kinds.for_profile(None) is EVENTS
    assert kinds.of({"actor": "test_echo_unit"}) is kind_echo.ECHO
    assert kinds.find({"actor": "another_apps_unit"}) is None
    assert kinds.of({"actor": "another_apps_unit"}) is EVENTS


def test_registering_a_second_kind_under_a_taken_name_actor_or_profile_is_refused():
    class Twin(kind_echo.EchoKind):
        name, actor_name = "twin", "twin_unit"

    with pytest.raises(ValueError, match="profile"):
        kinds.register(Twin())
    with pytest.raises(ValueError, match="actor"):
        kinds.register(type("SameActor", (kind_echo.EchoKind,), {"name": "other", "profiles": ()})())
    assert kinds.register(kind_echo.ECHO) is kind_echo.ECHO  # the same kind again: a no-op


def test_the_service_runs_the_tests_kind_end_to_end_through_its_own_status(echo_job):
    client, job_id = echo_job
    status = client.simulate_get(f"/api/trace/job/{job_id}").json
    assert status["rendered_by"] == "test-echo" and status["status"] == "completed"
    assert status["domains"] == ["echo"] and status["cid_count"] == len(CIDS)
    assert status["progress"] == "complete"  # the dashboard's contract on top of the kind's document
    listed = client.simulate_get("/api/v1/jobs").json["jobs"]
    assert [d["rendered_by"] for d in listed if d["job_id"] == job_id] == ["test-echo"]
    detail = client.simulate_get(f"/api/v1/jobs/{job_id}").json
    assert detail["rendered_by"] == "test-echo" and len(detail["units"]) == 4


def test_its_stream_pages_and_full_result_are_the_rows_its_units_wrote(echo_job):
    client, job_id = echo_job
    lines = [orjson.loads(x) for x in client.simulate_get(f"/api/trace/job/{job_id}/stream").text.splitlines()]
    assert [x["type"] for x in lines] == ["meta", "domain_start", *["records"] * 4, "domain_end", "complete"]
    assert [r for x in lines if x["type"] == "records" for r in x["data"]] == _expected_rows()
    binary = client.simulate_get(f"/api/trace/job/{job_id}/stream", headers={"Accept": wire.CONTENT_TYPE})
    frames = list(wire.read([binary.content]))
    assert [f["type"] for f in frames] == [x["type"] for x in lines]
    page = client.simulate_get(f"/api/trace/job/{job_id}/result", params={"domain": "echo", "limit": 3}).json
    assert page["results"]["echo"]["data"] == _expected_rows()[:3] and page["total"] == len(CIDS)
    whole = orjson.loads(client.simulate_get(f"/api/trace/job/{job_id}/result").content)
    assert whole["results"]["echo"]["data"] == _expected_rows() and whole["query_id"] == job_id


def test_its_export_is_typed_by_the_kind_and_the_generic_contract_serves_it(echo_job):
    client, job_id = echo_job
    resp = client.simulate_get(f"/api/v1/jobs/{job_id}/export", params={"format": "parquet"})
    assert resp.status_code == 200, resp.text
    table = pq.read_table(io.BytesIO(resp.content))
    assert [str(t) for t in table.schema.types] == ["string", "int64", "int64"]
    assert table.to_pylist() == _expected_rows()
    generic = client.simulate_get(f"/api/job/{job_id}", params={"prefix": "test-echo"}).json["data"]
    assert generic["status"] == "completed" and generic["query_id"] == job_id
    result = orjson.loads(client.simulate_get(f"/api/job/{job_id}/result").content)["data"]
    assert result["results"]["echo"]["data"] == _expected_rows()


def test_a_bad_request_of_the_kind_is_its_400(api_settings, api_broker, user):  # noqa: F811
    client = make_client(api_settings, api_broker, user)
    resp = client.simulate_post("/api/trace/events", json={"profile": kind_echo.PROFILE, "container_ids": [1]})
    assert resp.status_code == 400 and "container_ids" in resp.json["error"]["message"]
