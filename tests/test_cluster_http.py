"""The whole system over HTTP on the 3-master Redis Cluster: gunicorn and a supervisor with
``REDIS_URL=redis+cluster://...``, a trace job submitted, followed by SSE, paged and streamed.
"""

from __future__ import annotations

import json

import pytest

from tests.test_e2e_http import DOMAINS, System, call, direct, fingerprint, follow_events
from tracebus.trace.synth import cids


@pytest.fixture(scope="module")
def cluster_system(sample_db, redis_cluster, tmp_path_factory):
    redis_cluster.flushall()
    running = System(tmp_path_factory.mktemp("cluster-system"), sample_db, redis_url=redis_cluster.url,
                     TRACE_ASYNC_CID_THRESHOLD="500", TRACE_CHUNK_CIDS="100")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_a_trace_job_over_http_on_the_cluster_matches_the_source(cluster_system, sample_db, redis_cluster):
    system, container_ids = cluster_system, cids(sample_db)
    assert len(container_ids) > 500  # a job, not a synchronous answer
    with call("POST", f"{system.base_url}/api/trace/events",
              {"profile": "query_tool", "container_ids": container_ids, "domains": DOMAINS}) as resp:
        accepted = json.load(resp)
        assert resp.status == 202
    events = follow_events(system.base_url + accepted["events_url"], timeout_s=120)
    end = events[-1]["data"]
    assert end["status"] == "completed" and end["failed_domains"] == [], end

    job_url = system.base_url + accepted["status_url"]
    totals = {}
    for domain in DOMAINS:
        got, offset = [], 0
        while offset is not None:
            with call("GET", f"{job_url}/result?domain={domain}&offset={offset}&limit=2000") as resp:
                page = json.load(resp)
            got += [fingerprint(r) for r in page["results"][domain]["data"]]
            offset = page["next_offset"]
        assert sorted(got) == sorted(direct(sample_db, container_ids, domain).elements()), domain
        totals[domain] = len(got)
    with call("GET", f"{job_url}/stream") as resp:
        lines = [json.loads(raw) for raw in resp]
    assert lines[-1] == {"type": "complete", "total_records": sum(totals.values())}
    # the result is spread: every master holds some of its 36 units' chunks (a master with none
    # of them: (2/3)^36 x 3, about 1e-6)
    job_id = accepted["job_id"]
    held = [sum(1 for _ in c.scan_iter(match=f"e2e:job:{{{job_id}:*")) for c in redis_cluster.node_clients()]
    print(f"\nchunks per master: {held}")
    assert all(n > 0 for n in held), held
