"""``tracebus status [--json] [--watch]`` against a real supervisor and its workers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

import tests.actors as actors
from tests.clitools import ROOT, clean_env, run_cli
from tests.helpers import interruptible, wait_for
from tracebus.commands.status import JOB_STATES as STATES
from api.settings import ApiSettings
from tracebus.trace.service import TraceService


@pytest.fixture
def running(supervisor):
    """A supervisor with two workers on queue ``tests`` and the CLI environment that sees it."""
    sup = supervisor(processes=2)
    env = {"REDIS_URL": sup.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": sup.broker.keys.prefix}
    return sup, env


def status_doc(env) -> dict:
    result = run_cli("status", "--json", env=env)
    assert result.code == 0, result
    return json.loads(result.out)


def test_status_lists_live_workers_with_pid_rss_uptime_and_done(running):
    sup, env = running
    pids = sup.workers()

    def registered():
        doc = status_doc(env)
        return doc if {w["pid"] for w in doc["workers"]} == pids else None

    doc = sup.wait(registered, message="both workers registered")
    for w in doc["workers"]:
        assert w["host"] and w["rss_bytes"] > 1 << 20 and w["uptime_seconds"] >= 0
        assert w["done"] == 0 and w["current"] is None and w["queues"] == "tests"
    queues = {q["queue"]: q for q in doc["queues"]}
    assert queues["tests"] == {"queue": "tests", "length": 0, "pending": 0, "delayed": 0, "dead": 0}
    assert doc["jobs"] == dict.fromkeys(STATES, 0)

    # The text view shows the same, in tables
    text = run_cli("status", env=env).out
    assert "QUEUES" in text and "WORKERS (2 live)" in text and "JOBS" in text
    for pid in pids:
        assert str(pid) in text


def test_status_shows_the_running_message_done_counts_dead_letters_and_jobs(running):
    sup, env = running
    # Given a long message running, finished ones, a dead letter and a queued trace job
    for n in range(3):
        actors.record.send(n)
    actors.always_fails.send(99)
    message = actors.slow_record.send(7, 6)
    settings = ApiSettings.from_env({}, redis_url=env["REDIS_URL"], key_prefix=env["TRACEBUS_KEY_PREFIX"])
    service = TraceService(settings, sup.broker)
    job_id = service.submit(service.parse({"profile": "query_tool", "container_ids": ["A1", "A2"],
                                           "domains": ["history"]}, "carol"))

    # When the operator asks for the status
    def running_slow():
        doc = status_doc(env)
        busy = [w for w in doc["workers"] if w["current"] == f"slow_record:{message.message_id}"]
        return doc if busy and sum(w["done"] for w in doc["workers"]) >= 4 else None

    doc = sup.wait(running_slow, timeout_s=5, message="a worker shown running slow_record")
    # Then it names the message, counts what was done, the dead letter and the job by status
    queues = {q["queue"]: q for q in doc["queues"]}
    assert queues["tests"]["dead"] == 1 and queues["tests"]["pending"] == 1
    assert doc["jobs"]["queued"] == 1
    assert [j["job_id"] for j in doc["active_jobs"]] == [job_id]
    assert queues[settings.queue]["length"] == 1  # the job's first unit waits (no trace worker here)

    text = run_cli("status", env=env).out
    assert f"slow_record:{message.message_id}" in text and job_id in text and "queued 1" in text


def test_status_watch_refreshes_until_ctrl_c(running, tmp_path):
    sup, env = running
    out = tmp_path / "watch.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "tracebus", "status", "--watch", "0.2", "--json"],
                                cwd=ROOT, env=clean_env(**env), stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=interruptible)
    try:
        wait_for(lambda: len(out.read_text().splitlines()) >= 3, 15, message="three refreshes")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130  # interrupted, as every command (tracebus --help)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(docs) >= 3 and all(len(d["workers"]) == 2 for d in docs[1:])
    assert docs[0]["time"] < docs[-1]["time"]
