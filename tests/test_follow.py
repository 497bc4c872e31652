"""Follow mode at the job layer and the trace stream: units committed out of order and a failed
domain, against a real Redis, with the writer in this test driving each step."""

from __future__ import annotations

import json
import threading
import time

from tests.helpers import ndjson_lines, wait_for
from tests.test_results import keys, make_job, store, write_unit  # noqa: F401  (fixtures)
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs import wire
from tracebus.jobs.feed import ChunkFeed
from tracebus.trace import jobview, ndjson


def _collect(it, out: list, lines: bool = True) -> threading.Thread:
    """Read ``it`` in a thread into ``out``: NDJSON lines as they complete, else the blocks."""
    thread = threading.Thread(target=lambda: out.extend(ndjson_lines(it) if lines else it), daemon=True)
    thread.start()
    return thread


@ON_NODE_AND_CLUSTER
def test_a_followed_stream_sends_units_in_order_as_they_commit_and_reports_a_failed_domain(store):
    job_id = make_job(store, n_cids=4, domains=("history", "rejects", "materials"))  # units 0-1, 2-3, 4-5
    doc = jobview.render_status(store.status(job_id))
    lines: list[bytes] = []
    reader = _collect(ndjson.follow(store, doc), lines)

    first = write_unit(store, job_id, 0, [2, 1])
    wait_for(lambda: len(lines) >= 4, 10, message="unit 0's chunks")
    assert [json.loads(x)["type"] for x in lines] == ["meta", "domain_start", "records", "records"]
    assert json.loads(lines[1]) == {"type": "domain_start", "domain": "history", "total": None}
    third = write_unit(store, job_id, 4, [2])  # materials before rejects and history's unit 1
    time.sleep(0.3)  # time enough for a wrongly early chunk to go out
    assert len(lines) == 4  # nothing of unit 4 goes out before the units in front of it
    second = write_unit(store, job_id, 1, [3])
    attempt = store.begin_unit(job_id, 2)
    store.fail_unit(job_id, 2, attempt, "ORA-01013")
    rejects = write_unit(store, job_id, 3, [1])  # behind the failed unit: never sent
    last = write_unit(store, job_id, 5, [1])
    reader.join(10)

    got = [json.loads(x) for x in lines]
    assert not reader.is_alive() and store.status(job_id)["status"] == "partial"
    assert [(x["type"], x.get("domain")) for x in got] == [
        ("meta", None), ("domain_start", "history"), ("records", "history"), ("records", "history"),
        ("records", "history"), ("domain_end", "history"), ("domain_start", "rejects"), ("domain_end", "rejects"),
        ("domain_start", "materials"), ("records", "materials"), ("records", "materials"),
        ("domain_end", "materials"), ("warning", None), ("complete", None)]
    assert [r for x in got[2:5] for r in x["data"]] == json.loads(json.dumps(first + second))
    assert [r for x in got[9:11] for r in x["data"]] == json.loads(json.dumps(third + last))
    assert [x["batch"] for x in got if x["type"] == "records"] == [0, 1, 2, 0, 1]
    assert got[7] == {"type": "domain_end", "domain": "rejects", "count": 0, "failed": True} and rejects
    assert got[-2:] == [{"type": "warning", "code": "EVENTS_PARTIAL_FAILURE", "failed_domains": ["rejects"]},
                        {"type": "complete", "total_records": 9}]


def test_the_binary_follow_stream_carries_the_same_lines(store):
    job_id = make_job(store, n_cids=2, domains=("history",))
    doc = jobview.render_status(store.status(job_id))
    blocks: list[bytes] = []
    reader = _collect(ndjson.follow(store, doc, ndjson.BINARY), blocks, lines=False)
    rows = write_unit(store, job_id, 0, [1, 2])
    reader.join(5)

    messages = [wire.expand(m) for m in wire.read(blocks)]
    assert [m["type"] for m in messages] == ["meta", "domain_start", "records", "records", "domain_end", "complete"]
    assert [r for m in messages if m["type"] == "records" for r in m["data"]] == json.loads(json.dumps(rows))


def test_the_feed_gives_up_at_its_deadline(store):
    job_id = make_job(store, n_cids=2, domains=("history",))
    feed = ChunkFeed(store, job_id, max_s=0.3)
    started = time.monotonic()
    try:
        list(feed.follow("history", store.units_by_section(job_id)["history"]))
    except Exception as e:  # noqa: BLE001 - the type is the point
        assert type(e).__name__ == "FollowTimeout" and e.code == "FOLLOW_TIMEOUT"
    else:
        raise AssertionError("the feed did not time out")
    assert 0.25 < time.monotonic() - started < 2


def test_a_followed_ndjson_file_is_the_stream_of_the_ended_job(store, tmp_path):
    """``tracebus fetch --follow``'s file: null totals filled in and the failed domain cut out."""
    import argparse
    import io

    from tracebus.commands import fetch

    job_id = make_job(store, n_cids=4, domains=("history", "rejects", "materials"))  # units 0-1, 2-3, 4-5
    blocks: list[bytes] = []
    reader = _collect(ndjson.follow(store, jobview.render_status(store.status(job_id)), ndjson.BINARY), blocks,
                      lines=False)
    write_unit(store, job_id, 0, [2, 1])
    wait_for(lambda: len(blocks) >= 6, 10, message="unit 0's chunks")  # meta, domain_start, 2 x (head, chunk)
    write_unit(store, job_id, 1, [3])
    store.fail_unit(job_id, 2, store.begin_unit(job_id, 2), "ORA-01013")
    write_unit(store, job_id, 3, [1])
    write_unit(store, job_id, 4, [2])
    write_unit(store, job_id, 5, [1])
    reader.join(10)
    followed = [m for m in wire.read(blocks) if m["type"] in ("domain_start", "domain_end")]
    assert not reader.is_alive() and followed[0] == {"type": "domain_start", "domain": "history", "total": None}
    assert {"type": "domain_end", "domain": "rejects", "count": 0, "failed": True} in followed  # it did follow
    out = tmp_path / "followed.ndjson"

    code = fetch._save(iter(blocks), argparse.Namespace(out=str(out), format="ndjson"),
                       fetch.Progress(job_id, io.StringIO(), quiet=True))

    doc = jobview.render_status(store.status(job_id))
    plain = b"".join(ndjson.stream(store, job_id, doc["profile"], doc["domains"], doc["failed_domains"]))
    assert code == 0 and doc["failed_domains"] == ["rejects"] and out.read_bytes() == plain
    assert not list(tmp_path.glob("followed.ndjson.*"))


def test_a_unit_run_twice_is_followed_with_the_rows_of_its_one_committed_attempt(store):
    """A unit reclaimed from a worker that lost its claim: once committed, its manifest entry is final
    (the re-run skips it); before that, the stale attempt's commit is fenced off and only the re-run's
    rows go out. The followed lines are those of the finished job."""
    import pytest

    from tests.test_results import COLUMNS
    from tracebus.jobs.errors import StaleAttempt
    from tracebus.jobs.results import ChunkWriter

    job_id = make_job(store, n_cids=4, domains=("history", "rejects"))  # units 0-1, 2-3
    lines: list[bytes] = []
    reader = _collect(ndjson.follow(store, jobview.render_status(store.status(job_id))), lines)
    lost = store.begin_unit(job_id, 0)
    writer = ChunkWriter(store.redis, store.keys, job_id, "history", 0, lost, store.settings.job_ttl_s)
    writer.write(COLUMNS, [["u0", "a", 1, 1.5, None], ["u0", "a", 2, 3.0, None]])
    writer.commit()  # committed, then the worker loses its claim before settling
    wait_for(lambda: len(lines) >= 3, 10, message="attempt 1's chunk")
    assert store.begin_unit(job_id, 0) is None  # the re-run finds the commit and settles from it
    with pytest.raises(StaleAttempt):
        store.finish_unit(job_id, 0, lost, writer.rows)
    stale = store.begin_unit(job_id, 1)
    old = ChunkWriter(store.redis, store.keys, job_id, "history", 1, stale, store.settings.job_ttl_s)
    old.write(COLUMNS, [["stale", "a", 0, 0.0, None]])
    rerun = write_unit(store, job_id, 1, [2, 2])  # reclaimed before the first attempt committed
    with pytest.raises(StaleAttempt):
        old.commit()
    write_unit(store, job_id, 2, [1])
    write_unit(store, job_id, 3, [1])
    reader.join(10)

    doc = jobview.render_status(store.status(job_id))
    plain = [json.loads(x) for x in ndjson_lines(ndjson.stream(store, job_id, doc["profile"], doc["domains"]))]
    got = [json.loads(x) for x in lines]
    assert not reader.is_alive() and doc["state"] == "completed"
    assert [x for x in got if x["type"] != "domain_start"] == [x for x in plain if x["type"] != "domain_start"]
    history = [r for x in got if x.get("domain") == "history" and x["type"] == "records" for r in x["data"]]
    assert [r["N"] for r in history[:2]] == [1, 2] and history[2:] == json.loads(json.dumps(rerun))
