"""A Sentinel failover in the middle of a trace job: the replica is promoted (``SENTINEL
FAILOVER``) while units run. Workers and supervisor follow the new primary through the
sentinels, nobody crash-loops, units complete on the new primary within seconds, and the job
ends with exactly the rows of the direct query.

Everything is checked on the new primary itself: the old one goes on taking writes until
Sentinel demotes it (some 8 s later) and then discards them, so a count or a "completed" read
there says nothing (this test once read the job completed on the old primary, then found it
running again on the new one: ``JobNotComplete`` on its first page)."""

from __future__ import annotations

import time

import pytest
import redis

from tests.conftest_trace import assert_result, first_expected, request, start_workers, trace_service
from tracebus.engine.errors import BrokerConnectionError
from tracebus.jobs.view import FINAL_STATES


def final(svc, job: str) -> dict | None:
    try:
        doc = svc.status(job)
    except BrokerConnectionError:
        return None
    return doc if doc["state"] in FINAL_STATES else None


def on_node(port: int, svc, job: str, field: str) -> str | None:
    """A field of the job's hash as the node on ``port`` holds it (None while it does not answer)."""
    node = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        value = node.hget(svc.store.keys.job(job), field)
    except redis.RedisError:
        return None
    finally:
        node.close()
    return None if value is None else value.decode()


@pytest.mark.parametrize("topology", ["sentinel"], indirect=True)
def test_a_job_survives_a_failover_mid_job_with_the_same_rows(supervisor, redis_client, sentinel_group,
                                                               big_db, big_cids):
    # 200 units as a 20,000-CID job in chunks of 500 has (8,000 CIDs in chunks of 200): what the
    # failover tests is where the units and their results go, not the rows per unit
    count = 8_000
    some = big_cids[:count]
    svc, env = trace_service(big_db, TRACE_CHUNK_CIDS="200", TRACE_STREAM_BATCH_SIZE="400",
                             TRACE_FETCHMANY_SIZE="280")
    sup = start_workers(supervisor, svc, env)
    job = svc.submit(svc.parse(request(some), "alice"))
    sup.wait(lambda: svc.status(job)["progress"]["units_done"] >= 4, 30, "the job under way")

    promoted = time.monotonic()  # asked: the time measured includes the failover itself
    new = sentinel_group.failover()
    done_then = int(on_node(new, svc, job, "units_done") or 0)
    sup.wait(lambda: int(on_node(new, svc, job, "units_done") or 0) > min(done_then, 199), 10,
             "a unit done on the new primary")
    first_unit_s = time.monotonic() - promoted

    sup.wait(lambda: on_node(new, svc, job, "status") in FINAL_STATES, 90, "the job to finish on the new primary")
    status = sup.wait(lambda: final(svc, job), 10, "the service to read the final job")
    assert int(svc.store.redis.info("server")["tcp_port"]) == new, "the service reads the old primary"
    assert status["state"] == "completed", status
    assert status["progress"]["units_total"] == 200
    assert_result(svc, job, first_expected(big_db, count))
    print(f"first unit on the new primary {first_unit_s:.2f} s after the promotion")
    assert first_unit_s <= 5.0
    log = sup.log()
    assert len([line for line in log.splitlines() if "worker" in line and line.endswith("started")]) == 2, \
        "a worker was restarted: " + log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    sentinel_group.wait_replica()  # the group left whole: the next test may WAIT for a replica
