"""Logs: one line per event that matters (job submitted, unit started/finished/retried, worker
started/died/recycled, reclaim, dead-letter), naming the job id, the unit and the pid; one JSON
object per line with ``TRACEBUS_LOG_FORMAT=json``, ``job_id=... unit=...`` appended in the text
format when the message does not say it already."""

from __future__ import annotations

import io
import json
import logging
import os
import signal

import pytest

import tests.actors as actors
from tests.clitools import run_cli
from tracebus import logs
from tracebus.engine.message import Message
from tracebus.trace.synth import cids as trace_cids


def records(sup) -> list[dict]:
    """Every line of the supervisor's log, each parsed as one JSON object."""
    out = []
    for line in sup.log().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    return out


@pytest.fixture(autouse=True)
def describers():
    """Tests register describers of their own; put the process's back afterwards."""
    saved = dict(logs._describers)
    yield
    logs._describers.clear()
    logs._describers.update(saved)


@pytest.fixture
def capture():
    """A handler on the root logger, set up as ``logs.setup`` does, writing to a buffer."""
    def attach(fmt: str) -> io.StringIO:
        buffer = io.StringIO()
        handler = logging.StreamHandler(buffer)
        handler.setFormatter(logs.JsonFormatter() if fmt == "json" else logs.TextFormatter())
        handler.addFilter(logs._ContextFilter())
        root.addHandler(handler)
        added.append(handler)
        return buffer

    root, added, level = logging.getLogger(), [], logging.getLogger().level
    root.setLevel(logging.INFO)
    yield attach
    for handler in added:
        root.removeHandler(handler)
    root.setLevel(level)


# -- the formats -------------------------------------------------------------------------------------
def test_text_lines_name_the_job_and_unit_unless_the_message_does(capture):
    buffer = capture("text")
    log = logging.getLogger("tracebus.test")
    message = Message("trace-events", "trace_unit", ("trace-evt-0123456789ab", 7))
    logs.describe_messages("trace_unit", lambda job_id, unit: {"job_id": job_id, "unit": unit})
    with logs.context(**logs.message_fields(message)):
        log.warning("message %s (trace_unit) failed: boom; retry 1 in 2000 ms", message.message_id)
        log.info("job trace-evt-0123456789ab unit 7 done: 10 rows")
    log.info("no message here")
    first, second, third = buffer.getvalue().splitlines()
    assert first.endswith("retry 1 in 2000 ms job_id=trace-evt-0123456789ab unit=7")
    assert f"[{os.getpid()}]" in first and " WARNING " in first
    assert second.endswith("unit 7 done: 10 rows")  # already named: not repeated
    assert third.endswith("no message here")


def test_json_lines_carry_context_and_extras(capture):
    buffer = capture("json")
    log = logging.getLogger("tracebus.test")
    with logs.context(job_id="trace-evt-x", unit=3):
        log.info("inside", extra={"worker_pid": 42})
    log.error("outside")
    inside, outside = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert inside["msg"] == "inside" and inside["job_id"] == "trace-evt-x" and inside["unit"] == 3
    assert inside["worker_pid"] == 42 and inside["pid"] == os.getpid() and inside["level"] == "info"
    assert "job_id" not in outside and outside["level"] == "error"


def test_a_describer_that_does_not_fit_the_message_never_breaks_it():
    logs.describe_messages("odd", lambda job_id, unit: {"job_id": job_id})
    fields = logs.message_fields(Message("q", "odd", (1, 2, 3)))
    assert fields["actor"] == "odd" and "job_id" not in fields


def test_the_workers_retry_and_dead_letter_lines_carry_the_messages_fields(worker, capture):
    # Given an actor whose messages name a job, failing past its retries
    logs.describe_messages("always_fails", lambda n: {"job_id": f"job-{n}", "unit": n})
    buffer = capture("json")
    message = actors.always_fails.send(5)
    for delivery in worker.broker.fetch(["tests"], worker.consumer, 1, 100):
        worker.process(delivery)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    dead = [r for r in lines if "dead-lettered" in r["msg"]]
    assert len(dead) == 1 and dead[0]["job_id"] == "job-5" and dead[0]["unit"] == 5
    assert dead[0]["message_id"] == message.message_id and dead[0]["actor"] == "always_fails"


# -- real processes ----------------------------------------------------------------------------------
def test_json_logs_of_a_trace_job_one_line_per_event(supervisor, sample_db, tmp_path):
    # Given workers logging JSON that recycle after 2 (+ jitter 0-1) messages; 8 units to run
    sup = supervisor("--max-jobs", "2", processes=2, modules=("tracebus.trace.tasks",),
                     TRACEBUS_SQLITE_PATH=str(sample_db), TRACEBUS_LOG_FORMAT="json", TRACE_CHUNK_CIDS="25")
    env = {"REDIS_URL": sup.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": sup.broker.keys.prefix,
           "TRACE_CHUNK_CIDS": "25", "TRACEBUS_LOG_FORMAT": "json"}
    cid_file = tmp_path / "cids.txt"
    cid_file.write_text("\n".join(trace_cids(sample_db)[:200]))

    # When a job is submitted (the submitting process logs it) and runs to the end
    result = run_cli("submit", "--profile", "query_tool", "--domains", "history",
                     "--cids-file", str(cid_file), "--wait", "--interval", "0.05", env=env)
    assert result.code == 0, result
    job_id = result.out.split()[1]
    submitted = [json.loads(line) for line in result.err.splitlines() if line.startswith("{")]
    assert [r["job_id"] for r in submitted if "submitted" in r["msg"]] == [job_id]

    # Then every line of the workers' log is one JSON object
    sup.wait(lambda: any("recycled after max jobs" in r["msg"] for r in records(sup)), message="a recycle")
    # the job is complete once its last unit is settled; that unit's "done" line follows
    sup.wait(lambda: sum(r.get("job_id") == job_id and ") done" in r["msg"] for r in records(sup)) >= 8,
             message="the last unit's done line")
    lines = records(sup)
    unit_lines = [r for r in lines if r.get("job_id") == job_id]
    for event in ("started", "done"):
        units = sorted(r["unit"] for r in unit_lines if f") {event}" in r["msg"])
        assert units == list(range(8)), (event, unit_lines)
    worker_pids = {r["worker_pid"] for r in lines if r["msg"].endswith(" started") and "worker_pid" in r}
    assert len(worker_pids) >= 3  # the first two, and at least one replacing a recycled worker
    assert all(r["pid"] in worker_pids for r in unit_lines)  # a unit's lines come from its worker
    recycled = [r for r in lines if "recycled after max jobs" in r["msg"]]
    assert recycled and all(r["worker_pid"] in worker_pids for r in recycled)


def test_json_logs_of_retries_deaths_reclaims_and_dead_letters(supervisor):
    sup = supervisor(processes=1, TRACEBUS_LOG_FORMAT="json")
    [pid] = sup.workers()
    # A message retried then dead-lettered, and a worker killed in the middle of a long one
    failing = actors.flaky.send(1, 9)
    sup.wait(lambda: any("dead-lettered" in r["msg"] for r in records(sup)), message="the dead-letter line")
    slow = actors.slow_record.send(2, 30)
    client, prefix = sup.broker.client, sup.broker.keys.prefix
    sup.wait(lambda: client.hget(f"{prefix}:test:started", 2), timeout_s=15, message="slow_record started")
    os.kill(pid, signal.SIGKILL)
    sup.wait(lambda: any("reclaimed" in r["msg"] for r in records(sup)), message="the reclaim line")
    lines = records(sup)

    retries = [r for r in lines if "retry" in r["msg"] and r.get("message_id") == failing.message_id]
    assert len(retries) == 3 and all(r["level"] == "warning" and r["pid"] == pid for r in retries)
    dead = [r for r in lines if "dead-lettered" in r["msg"]]
    assert [r["message_id"] for r in dead] == [failing.message_id]
    died = [r for r in lines if r.get("worker_pid") == pid and "killed by SIGKILL" in r["msg"]]
    assert len(died) == 1 and died[0]["level"] == "error" and died[0]["pid"] == sup.pid
    [reclaim] = [r for r in lines if "reclaimed" in r["msg"]]
    assert reclaim["message_id"] == slow.message_id and reclaim["actor"] == "slow_record"
    assert f":{pid}:" in reclaim["msg"] and "requeued=1" in reclaim["msg"]


# -- the text console ---------------------------------------------------------------------------------
def test_the_text_console_leaves_per_unit_lines_to_debug_and_json_keeps_them():
    import contextlib

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        shown = {}
        for fmt, level in (("text", "info"), ("text", "debug"), ("json", "info")):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                logs.setup(fmt, level)
                logging.getLogger("tracebus.jobs.units").info("job j unit 3 (history) done: 10 rows")
                logging.getLogger("tracebus.jobs.runner").info("job j completed in 1.0 s")
            shown[fmt, level] = err.getvalue()
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    assert "unit 3" not in shown["text", "info"] and "job j completed" in shown["text", "info"]
    assert "unit 3" in shown["text", "debug"]
    assert "unit 3" in shown["json", "info"] and "job j completed" in shown["json", "info"]


def test_a_jobs_progress_summary_is_taken_once_per_period_by_all_workers(redis_client, settings):
    from tracebus.jobs.store import JobStore

    store = JobStore(redis_client, settings)
    assert store.summary_tick("trace-evt-summary0001", 10) is True
    assert [store.summary_tick("trace-evt-summary0001", 10) for _ in range(5)] == [False] * 5
    assert 0 < redis_client.ttl(store.keys.job_summary_tick("trace-evt-summary0001")) <= 10  # it expires


def test_a_text_console_shows_a_job_in_a_few_lines_and_a_cli_answer_alone(supervisor, sample_db, tmp_path):
    # Given workers logging text at the default INFO level; 8 units to run
    sup = supervisor(processes=2, modules=("tracebus.trace.tasks",),
                     TRACEBUS_SQLITE_PATH=str(sample_db), TRACE_CHUNK_CIDS="25")
    env = {"REDIS_URL": sup.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": sup.broker.keys.prefix,
           "TRACE_CHUNK_CIDS": "25"}
    cid_file = tmp_path / "cids.txt"
    cid_file.write_text("\n".join(trace_cids(sample_db)[:200]))

    result = run_cli("submit", "--profile", "query_tool", "--domains", "history",
                     "--cids-file", str(cid_file), "--wait", "--interval", "0.05", env=env)

    assert result.code == 0, result
    job_id = result.out.split()[1]
    assert " INFO " not in result.err, result.err  # the answer, without a log line repeating it
    sup.wait(lambda: f"job {job_id} completed in" in sup.log(), message="the job's end line")
    lines = [ln for ln in sup.log().splitlines() if job_id in ln]
    assert not [ln for ln in lines if "unit" in ln.split(job_id, 1)[1][:8]], lines  # no per-unit line
    assert sum(f"job {job_id} completed in" in ln for ln in lines) == 1
    assert "8/8 units done, 0 failed" in next(ln for ln in lines if "completed in" in ln)
    assert 1 <= sum(f"job {job_id} running:" in ln for ln in lines) <= 2, lines  # one per 10 s at most
