"""GET /api/trace/job/{id}[/result]: status and paged results, over real workers and Redis.

Paged rows are compared with the SQLite source as multisets; a job is held "running" by
running one of its units in the test process with the real unit code while the rest wait
on a queue no worker reads.
"""

from __future__ import annotations

import pytest

from tests.api_support import (api_broker, api_settings, body, canonical, client, idle_client,  # noqa: F401
                               make_client, page_all, source_rows, submit, trace_cids, trace_workers,
                               user, wait_job)
from tracebus.engine.actor import set_broker
from tracebus.trace.sources.sqlite import SqliteSource
from tests.helpers import run_trace_unit_here


def job_url(job_id: str, tail: str = "") -> str:
    return f"/api/trace/job/{job_id}{tail}"


@pytest.fixture
def running_job(api_settings, api_broker, idle_client, trace_cids, sample_db):
    """A 300-CID history job whose first unit (CIDs 0..99) is done and the rest wait."""
    job = submit(idle_client, trace_cids[:300])
    set_broker(api_broker)
    source = SqliteSource(sample_db)
    try:
        run_trace_unit_here(api_broker, api_settings.replace(queue="idle-queue"), source, job, 0)
    finally:
        source.close()
        set_broker(None)
    return job


def test_the_status_of_a_finished_job_has_progress_counts_and_times(client, trace_cids):
    job = submit(client, trace_cids[:450], ["history", "holds"])

    doc = wait_job(client, job)

    assert doc["job_id"] == job and doc["status"] == doc["state"] == "completed"
    assert doc["profile"] == "query_tool" and doc["cid_count"] == 450
    assert doc["domains"] == ["history", "holds"]
    assert doc["progress"] == "complete"
    detail = doc["progress_detail"]
    assert detail["units_done"] == detail["units_total"] == 10  # 2 domains x 5 chunks
    assert detail["stage"] == "complete" and detail["rows"] > 0
    assert doc["query_id"] == job and doc["trace_query_id"] is None
    assert doc["created_at"] <= doc["started_at"] <= doc["finished_at"]
    assert doc["elapsed_seconds"] >= 0 and doc["estimated_remaining_seconds"] == 0
    assert doc["error"] is None and doc["failed_domains"] == []


def test_every_domain_paged_through_equals_the_source(client, trace_cids, sample_db):
    cids = trace_cids[:640]
    domains = ["history", "materials", "rejects", "holds", "jobs"]
    job = submit(client, cids, domains)
    assert wait_job(client, job)["status"] == "completed"

    for domain in domains:
        rows = page_all(client, job, domain, limit=137)  # pages straddle stored chunks and units
        assert sorted(canonical(r) for r in rows) == sorted(source_rows(sample_db, domain, cids).elements())


def test_a_page_has_the_original_shape_and_the_flat_paging_fields(client, trace_cids):
    job = submit(client, trace_cids[:300])
    wait_job(client, job)

    page = client.simulate_get(job_url(job, "/result"), params={"domain": "history", "limit": 10}).json
    end = client.simulate_get(job_url(job, "/result"),
                              params={"domain": "history", "offset": page["total"] + 5}).json

    assert page["stage"] == "events" and page["job_id"] == job and page["status"] == "completed"
    assert (page["domain"], page["offset"], page["limit"], page["count"]) == ("history", 0, 10, 10)
    assert page["next_offset"] == 10 and page["complete"] is True and page["aggregation"] is None
    assert page["columns"][0] == "CONTAINERID"
    assert [list(r) for r in page["results"]["history"]["data"]] == [page["columns"]] * 10
    assert end["results"]["history"]["data"] == [] and end["next_offset"] is None
    assert end["total"] == page["total"]


def test_a_domain_with_no_rows_pages_with_its_kinds_columns(client):
    from tracebus.trace.domains import COLUMNS

    job = submit(client, [f"NO-SUCH-LOT-{i:04d}" for i in range(300)], ["holds"])  # found nowhere
    assert wait_job(client, job)["status"] == "completed"

    page = client.simulate_get(job_url(job, "/result"), params={"domain": "holds"}).json

    assert page["total"] == 0 and page["results"]["holds"]["data"] == []
    assert page["columns"] == list(COLUMNS["holds"])  # no row stored them: the kind names them


@pytest.mark.parametrize("params, says", [
    ({"domain": "history", "offset": "-1"}, "offset"),
    ({"domain": "history", "offset": "abc"}, "offset"),
    ({"domain": "history", "limit": "-1"}, "limit"),
    ({"domain": "history", "limit": "50001"}, "limit"),
    ({"domain": "history", "limit": "1e3"}, "limit"),
    ({"domain": "history", "partial": "maybe"}, "partial"),
])
def test_bad_result_parameters_are_400_and_name_the_parameter(idle_client, trace_cids, params, says):
    job = submit(idle_client, trace_cids[:300])

    resp = idle_client.simulate_get(job_url(job, "/result"), params=params)

    assert resp.status_code == 400, resp.text
    assert resp.json["error"]["code"] == "INVALID_PARAMS"
    assert says in resp.json["error"]["message"]


def test_reading_a_queued_job_is_409_with_its_status(idle_client, trace_cids):
    job = submit(idle_client, trace_cids[:300])

    resp = idle_client.simulate_get(job_url(job, "/result"), params={"domain": "history"})

    assert resp.status_code == 409
    assert resp.json["error"]["code"] == "JOB_NOT_COMPLETE" and resp.json["status"] == "queued"
    assert idle_client.simulate_get(job_url(job, "/stream")).status_code == 409


def test_a_running_job_is_409_but_partial_reads_its_finished_prefix(idle_client, running_job, trace_cids,
                                                                     sample_db):
    assert idle_client.simulate_get(job_url(running_job)).json["status"] == "running"

    refused = idle_client.simulate_get(job_url(running_job, "/result"), params={"domain": "history"})
    page = idle_client.simulate_get(job_url(running_job, "/result"),
                                    params={"domain": "history", "partial": "1", "limit": 50000}).json

    assert refused.status_code == 409 and refused.json["status"] == "running"
    assert page["complete"] is False and page["next_offset"] is None and page["status"] == "running"
    rows = page["results"]["history"]["data"]
    assert page["total"] == len(rows) > 0
    assert sorted(canonical(r) for r in rows) == sorted(source_rows(sample_db, "history",
                                                                    trace_cids[:100]).elements())


def test_a_cancelled_job_cannot_be_read_whole_but_its_prefix_can(idle_client, running_job):
    assert idle_client.simulate_post(f"/api/v1/jobs/{running_job}/cancel").status_code == 200

    whole = idle_client.simulate_get(job_url(running_job, "/result"), params={"domain": "history"})
    stream = idle_client.simulate_get(job_url(running_job, "/stream"))
    prefix = idle_client.simulate_get(job_url(running_job, "/result"),
                                      params={"domain": "history", "partial": 1})

    assert whole.status_code == stream.status_code == 409
    assert whole.json["error"]["code"] == stream.json["error"]["code"] == "JOB_STATE_CONFLICT"
    assert "cancelled" in whole.json["error"]["message"]
    assert prefix.status_code == 200 and prefix.json["total"] > 0


def test_a_result_whose_chunks_expired_is_404_result_expired(client, api_broker, trace_cids):
    job = submit(client, trace_cids[:300])
    wait_job(client, job)
    # the history chunks: each under its own tag, named after the job, section, unit, attempt
    chunks = [k for k in api_broker.client.scan_iter(match=f"{api_broker.keys.prefix}:job:{{{job}:history:*")
              if not k.endswith(b":parquet")]  # not a columnar copy: the pages and stream read the chunk
    api_broker.client.delete(chunks[0])  # as if its TTL had run out before the job hash's

    page = client.simulate_get(job_url(job, "/result"), params={"domain": "history", "limit": 50000})
    stream = client.simulate_get(job_url(job, "/stream"))

    assert page.status_code == stream.status_code == 404
    assert page.json["error"]["code"] == stream.json["error"]["code"] == "JOB_RESULT_EXPIRED"


@pytest.mark.parametrize("method, tail", [
    ("GET", ""), ("GET", "/result?domain=history"), ("GET", "/stream"), ("GET", "/events"),
])
def test_unknown_and_other_users_jobs_are_404(client, trace_cids, method, tail):
    job = submit(client, trace_cids[:300])
    wait_job(client, job)

    for job_id, headers in (("trace-evt-000000000000", None), (job, {"X-User-Id": "mallory"}),
                            ("no-such-job", None), ("x" * 500, None)):
        resp = client.simulate_request(method, job_url(job_id, tail), headers=headers)
        assert resp.status_code == 404, (job_id, resp.text)
        assert resp.json["error"]["code"] == "JOB_NOT_FOUND"
