"""The streamed endpoints: NDJSON results and server-sent progress events.

The test client consumes a streamed body to its end, so an event stream that did not end
when the job did would hang the test (pytest-timeout turns that into a failure).
"""

from __future__ import annotations

import json
import threading
import time

from tests.api_support import (api_broker, api_settings, canonical, client, idle_client,  # noqa: F401
                               make_client, parse_sse, source_rows, submit, trace_cids, trace_workers,
                               user, wait_job)


def test_the_ndjson_stream_follows_the_protocol_and_holds_every_row(client, trace_cids, sample_db):
    cids, domains = trace_cids[:450], ["history", "rejects", "holds"]
    job = submit(client, cids, domains)
    wait_job(client, job)

    resp = client.simulate_get(f"/api/trace/job/{job}/stream")

    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/x-ndjson"
    assert resp.headers["cache-control"] == "no-cache" and resp.headers["x-accel-buffering"] == "no"
    assert resp.text.endswith("\n")
    lines = [json.loads(line) for line in resp.text.splitlines()]
    assert lines[0] == {"type": "meta", "job_id": job, "profile": "query_tool", "domains": domains}
    assert lines[-1]["type"] == "complete"
    rows: dict[str, list] = {}
    current, declared, batches = None, {}, {}
    for line in lines[1:-1]:
        if line["type"] == "domain_start":
            current, declared[line["domain"]] = line["domain"], line["total"]
            rows[current] = []
        elif line["type"] == "records":
            assert line["domain"] == current and line["batch"] == batches.get(current, 0)
            batches[current] = line["batch"] + 1
            assert line["count"] == len(line["data"]) <= 400  # TRACE_STREAM_BATCH_SIZE
            rows[current] += line["data"]
        else:
            assert line == {"type": "domain_end", "domain": current, "count": len(rows[current])}
    assert list(rows) == domains
    for domain in domains:
        assert declared[domain] == len(rows[domain])
        want = source_rows(sample_db, domain, cids)
        assert sorted(canonical(r) for r in rows[domain]) == sorted(want.elements())
    assert lines[-1]["total_records"] == sum(len(r) for r in rows.values())


def test_the_event_stream_replays_progress_and_ends_with_the_final_status(client, trace_cids):
    job = submit(client, trace_cids[:500], ["history", "materials"])

    resp = client.simulate_get(f"/api/trace/job/{job}/events")  # returns once the stream ends

    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.headers["cache-control"] == "no-cache"
    messages = parse_sse(resp.text)
    assert messages[0] == {"retry": "3000"}
    progress = [m for m in messages if m.get("event") == "progress"]
    end = messages[-1]
    assert end["event"] == "end" and end["data"]["status"] == "completed" and end["data"]["job_id"] == job
    assert progress[0]["data"]["event"] == "created"
    ids = [tuple(map(int, m["id"].split("-"))) for m in progress]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    done = [m["data"] for m in progress if m["data"]["event"] == "unit_done"]
    assert len(done) == 10 and done[-1]["units_done"] == done[-1]["units_total"] == 10
    assert progress[-1]["data"]["status"] == "completed"


def test_reconnecting_with_last_event_id_resumes_after_that_event(client, trace_cids):
    job = submit(client, trace_cids[:300])
    wait_job(client, job)
    first = [m for m in parse_sse(client.simulate_get(f"/api/trace/job/{job}/events").text) if "id" in m]
    middle = first[len(first) // 2]["id"]

    resumed = parse_sse(client.simulate_get(f"/api/trace/job/{job}/events",
                                            headers={"Last-Event-ID": middle}).text)

    assert [m["id"] for m in resumed if m.get("event") == "progress"] == \
        [m["id"] for m in first if m.get("event") == "progress"][len(first) // 2 + 1:]
    assert resumed[-1]["event"] == "end"


def test_a_malformed_last_event_id_is_400(client, trace_cids):
    job = submit(client, trace_cids[:300])

    for bad in ("yesterday", "12", "1-2-3", f"{2 ** 64}-0"):
        resp = client.simulate_get(f"/api/trace/job/{job}/events", headers={"Last-Event-ID": bad})
        assert resp.status_code == 400 and resp.json["error"]["code"] == "INVALID_PARAMS", bad


def test_a_quiet_event_stream_sends_heartbeats_and_ends_when_the_job_is_cancelled(api_settings, api_broker,
                                                                                user, trace_cids):
    client = make_client(api_settings, api_broker, user, queue="idle-queue", api_sse_heartbeat_s=1)
    job = submit(client, trace_cids[:300])
    canceller = threading.Timer(2.5, lambda: client.simulate_post(f"/api/v1/jobs/{job}/cancel"))
    canceller.start()
    try:
        started = time.monotonic()
        messages = parse_sse(client.simulate_get(f"/api/trace/job/{job}/events").text)
    finally:
        canceller.cancel()

    assert time.monotonic() - started < 10
    assert sum(1 for m in messages if m.get("comment") == "heartbeat") >= 1
    end = messages[-1]
    assert end["event"] == "end" and end["data"]["status"] == "failed" and end["data"]["state"] == "cancelled"
    assert end["data"]["code"] == "JOB_CANCELLED" and end["data"]["error"]
    assert messages[-2]["data"]["status"] == "failed" and messages[-2]["data"]["code"] == "JOB_CANCELLED"
    assert messages[-2]["data"]["event"] == "cancelled"


def test_an_event_stream_closes_after_its_lifetime_without_an_end(api_settings, api_broker, user, trace_cids):
    client = make_client(api_settings, api_broker, user, queue="idle-queue", api_sse_heartbeat_s=1,
                         api_sse_max_s=1)
    job = submit(client, trace_cids[:300])

    messages = parse_sse(client.simulate_get(f"/api/trace/job/{job}/events").text)

    events = [m.get("event") for m in messages if "comment" not in m]
    assert events == [None, "progress"]  # retry:, created; then closed, without an end
