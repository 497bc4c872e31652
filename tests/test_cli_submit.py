"""``tracebus submit [--wait] [--api URL]`` and ``tracebus fetch JOB --out FILE`` end to end:
real workers (``tracebus worker tracebus.trace.tasks`` on the sample database), the CLI as a
subprocess (forked from a server that has imported it, ``forked_cli``), and for
``--api`` a real gunicorn serving ``api.app:get_app()`` with ``api/gunicorn.conf.py``, as the
systemd unit runs it.

The workers and the API are started once per module (``trace``, ``api``) and shared by its tests:
each test submits and checks jobs of its own, so none needs a fresh pool; nothing here flushes the
database under them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.clitools import ROOT, clean_env, run_cli
from tests.conftest_proc import Supervisors
from tests.helpers import NO_REUSE, wait_for
from tests.redis_server import free_port
from tracebus.commands.submit import read_cids
from api.settings import ApiSettings
from tracebus.trace.service import TraceService
from tracebus.trace.sources.sqlite import SqliteSource
from tracebus.trace.synth import cids as trace_cids

DOMAINS = ["history", "rejects", "holds"]
#: Small units, so a 300-CID job has 18 of them and the progress bar moves.
JOB_ENV = {"TRACE_CHUNK_CIDS": "50", "TRACE_JOB_MAX_INFLIGHT_UNITS": "2", "TRACE_STREAM_BATCH_SIZE": "200",
           **NO_REUSE}


@pytest.fixture(scope="module")
def supervisors(redis_server, tmp_path_factory):
    """The module's supervisor factory (:class:`tests.conftest_proc.Supervisors`): its own key
    prefix on the session's Redis, every supervisor killed at the end of the module."""
    factory = Supervisors(redis_server.url, tmp_path_factory.mktemp("supervisors"))
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def trace(supervisors, sample_db, tmp_path_factory):
    """Two trace workers on the sample database, for the whole module; returns (supervisor, CLI
    env, CID file)."""
    tmp_path = tmp_path_factory.mktemp("trace")
    sup = supervisors(processes=2, modules=("tracebus.trace.tasks",), TRACEBUS_SQLITE_PATH=str(sample_db),
                      **JOB_ENV)
    env = {"REDIS_URL": sup.broker.settings.redis_url, "TRACEBUS_KEY_PREFIX": sup.broker.keys.prefix,
           "TRACEBUS_SQLITE_PATH": str(sample_db), **JOB_ENV}
    cid_file = tmp_path / "cids.txt"
    cid_file.write_text("# the first 300 trace CIDs\n" + "\n".join(trace_cids(sample_db)[:300]) + "\n")
    return sup, env, cid_file


def service_for(env) -> TraceService:
    from tracebus.engine.broker import Broker

    settings = ApiSettings.from_env(env)
    return TraceService(settings, Broker(settings))


def expected_rows(sample_db, cid_file) -> dict[str, int]:
    cids = read_cids(str(cid_file))
    source = SqliteSource(str(sample_db))
    try:
        return {d: sum(len(rows) for _, rows in source.fetch(d, cids, 1000)) for d in DOMAINS}
    finally:
        source.close()


def ndjson_counts(path) -> tuple[list[dict], Counter]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    counts = Counter()
    for line in lines:
        if line["type"] == "records":
            counts[line["domain"]] += line["count"]
            assert len(line["data"]) == line["count"]
    return lines, counts


def test_submit_wait_shows_progress_then_a_summary_and_fetch_streams_the_result(trace, sample_db, tmp_path,
                                                                               forked_cli):
    sup, env, cid_file = trace
    expected = expected_rows(sample_db, cid_file)

    # When the operator submits a job and waits for it
    result = forked_cli.cli("submit", "--profile", "query_tool", "--domains", "history,rejects", "holds",
                            "--cids-file", str(cid_file), "--wait", "--interval", "0.05", "--user", "ops",
                            env={**env, "COLUMNS": "200"})
    # Then the job completes: exit 0, a summary on stdout, a progress bar on stderr
    assert result.code == 0, result
    summary = result.out.strip().splitlines()
    assert summary[0].startswith("job trace-evt-") and " completed in " in summary[0]
    job_id = summary[0].split()[1]
    total = sum(expected.values())
    assert f"18/18 units, 0 failed, {total:,} rows" in summary[0]
    assert summary[-1] == f"result: tracebus fetch {job_id} --out {job_id}.ndjson"
    bars = [line for line in result.err.splitlines() if line.startswith(f"{job_id} [")]
    assert len(bars) >= 2, result.err
    assert "units" in bars[0] and "rows" in bars[0] and "ETA" in bars[0]
    assert bars[-1].startswith(f"{job_id} [{'#' * 30}] 18/18 units  {total:,} rows  ")
    assert re.search(r"  [\d,]+ rows/s  0:\d\d elapsed  ETA 0:00  completed$", bars[-1]), bars[-1]
    assert "no worker serves" not in result.err

    status = service_for(env).status(job_id)
    assert status["state"] == "completed" and status["user"] == "ops"

    # And fetch streams the whole result to a file (never leaving a partial one)
    out = tmp_path / "result.ndjson"
    fetched = forked_cli.cli("fetch", job_id, "--out", str(out), env=env)
    assert fetched.code == 0, fetched
    assert f"wrote {total:,} records" in fetched.err
    lines, counts = ndjson_counts(out)
    assert lines[0] == {"type": "meta", "job_id": job_id, "profile": "query_tool", "domains": DOMAINS}
    assert lines[-1] == {"type": "complete", "total_records": total}
    assert dict(counts) == {d: n for d, n in expected.items() if n}
    assert not (tmp_path / "result.ndjson.part").exists()

    # --out - writes the same bytes to stdout
    to_stdout = forked_cli.run("fetch", job_id, "--out", "-", env=env, text=False)
    assert to_stdout.returncode == 0 and to_stdout.stdout == out.read_bytes()


def test_submit_without_wait_prints_the_job_id(trace):
    sup, env, cid_file = trace
    result = run_cli("submit", "--profile", "mid_section_defect", "--domains", "upstream_history",
                     "--cids-file", str(cid_file), env=env)
    assert result.code == 0, result
    job_id = result.out.strip()
    assert job_id.startswith("trace-evt-")
    assert f"tracebus jobs show {job_id}" in result.err
    service = service_for(env)
    sup.wait(lambda: service.status(job_id)["state"] == "completed", timeout_s=30, message="the job done")


def test_fetch_of_an_unfinished_job_fails_cleanly(redis_url, tmp_path):
    # A job whose units wait on a queue no worker reads (a prefix of its own: no flush, the
    # module's workers run on this database)
    env = {"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": f"tbfetch{os.urandom(3).hex()}",
           "TRACE_WORKER_QUEUE": "nobody-reads"}
    service = service_for(env)
    job_id = service.submit(service.parse({"profile": "query_tool", "container_ids": ["A", "B"],
                                           "domains": ["history"]}, "ops"))
    out = tmp_path / "x.ndjson"
    result = run_cli("fetch", job_id, "--out", str(out), env=env)
    assert result.code == 1
    assert result.err.startswith("tracebus: ") and "Traceback" not in result.err
    assert not out.exists() and not (tmp_path / "x.ndjson.part").exists()


@pytest.mark.parametrize("args,message", [
    (["--profile", "nope", "--domains", "history"], "unknown profile 'nope'"),
    (["--profile", "query_tool", "--domains", "upstream_history"], "upstream_history"),
    (["--profile", "query_tool", "--domains", "history", "--params", "{bad"], "--params is not JSON"),
])
def test_submit_rejects_bad_input_with_exit_2(trace, args, message):
    sup, env, cid_file = trace
    result = run_cli("submit", *args, "--cids-file", str(cid_file), env=env)
    assert result.code == 2, result
    assert message in result.err and "Traceback" not in result.err


def test_submit_needs_a_readable_non_empty_cids_file(trace, tmp_path):
    sup, env, _ = trace
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    for path, message in ((tmp_path / "missing.txt", "cannot read"), (empty, "no container ids")):
        result = run_cli("submit", "--profile", "query_tool", "--domains", "history",
                         "--cids-file", str(path), env=env)
        assert result.code == 2 and message in result.err, result


# -- through the HTTP API ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def api(trace, tmp_path_factory):
    """gunicorn serving the API on a free port, over the same Redis and prefix as the workers,
    for the whole module."""
    sup, env, cid_file = trace
    tmp_path = tmp_path_factory.mktemp("api")
    port = free_port()
    api_env = clean_env(**env, TRACEBUS_API_BIND=f"127.0.0.1:{port}", TRACEBUS_API_WORKERS="1",
                        TRACE_ASYNC_CID_THRESHOLD="10", TRACEBUS_LOG_LEVEL="warning",
                        TRACEBUS_TRUSTED_PROXIES="127.0.0.1")  # the CLI's --user is believed
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(Path(sys.prefix) / "bin" / "gunicorn"), "api.app:get_app()",
                                 "-c", "api/gunicorn.conf.py"],
                                cwd=ROOT, env=api_env, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"gunicorn exited:\n{log.read_text()[-3000:]}") from None
            return False

    try:
        wait_for(healthy, 20, message="gunicorn answering /healthz")
        yield sup, env, cid_file, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_submit_and_fetch_through_the_api(api, sample_db, tmp_path, forked_cli):
    sup, env, cid_file, url = api
    total = sum(expected_rows(sample_db, cid_file).values())
    result = forked_cli.cli("submit", "--api", url, "--user", "apiuser", "--profile", "query_tool",
                            "--domains", *DOMAINS, "--cids-file", str(cid_file), "--wait",
                            "--interval", "0.05",
                            env=env)
    assert result.code == 0, result
    first = result.out.splitlines()[0]
    assert " completed in " in first and f"{total:,} rows" in first
    job_id = first.split()[1]
    assert service_for(env).status(job_id)["user"] == "apiuser"

    via_api, via_library = tmp_path / "api.ndjson", tmp_path / "lib.ndjson"
    fetched = run_cli("fetch", job_id, "--api", url, "--user", "apiuser", "--out", str(via_api), env=env)
    assert fetched.code == 0, fetched
    assert run_cli("fetch", job_id, "--out", str(via_library), env=env).code == 0
    assert via_api.read_bytes() == via_library.read_bytes()

    # Errors of the API become the CLI's: another user's job is not found (exit 1)
    other = run_cli("fetch", job_id, "--api", url, "--user", "someone-else", "--out", str(tmp_path / "o"),
                    env=env)
    assert other.code == 1 and "JOB_NOT_FOUND" in other.err


def test_submit_through_the_api_below_the_async_threshold_is_answered_at_once(api, tmp_path):
    sup, env, cid_file, url = api
    few = tmp_path / "few.txt"
    few.write_text("\n".join(read_cids(str(cid_file))[:5]))  # 5 CIDs: <= threshold 10
    result = run_cli("submit", "--api", url, "--profile", "query_tool", "--domains", "history",
                     "--cids-file", str(few), "--wait", env=env)
    assert result.code == 0, result
    assert result.out.startswith("answered synchronously") and "history" in result.out

    bad = run_cli("submit", "--api", url, "--profile", "nope", "--domains", "history",
                  "--cids-file", str(few),
                  env=env)
    assert bad.code == 2 and "INVALID_PROFILE" in bad.err


def test_the_progress_bar_fits_a_narrow_terminal(trace, forked_cli):
    sup, env, cid_file = trace
    result = forked_cli.cli("submit", "--profile", "query_tool", "--domains", "history",
                            "--cids-file", str(cid_file), "--wait", "--interval", "0.05",
                            env={**env, "COLUMNS": "70"})
    assert result.code == 0, result
    bars = [line for line in result.err.splitlines() if line.startswith("[")]
    assert bars and all(len(line) < 70 for line in bars), bars
    assert bars[-1].startswith("[#") and "6/6 units" in bars[-1] and "rows/s" in bars[-1]


def test_submit_wait_says_when_no_worker_serves_the_queue_until_one_does(supervisors, sample_db, tmp_path,
                                                                         forked_cli):
    queue = "nobody-yet"  # the module's trace workers read another queue
    cid_file = tmp_path / "cids.txt"
    cid_file.write_text("\n".join(trace_cids(sample_db)[:100]))
    env = {**JOB_ENV, "TRACE_WORKER_QUEUE": queue, "TRACEBUS_SQLITE_PATH": str(sample_db)}
    log = tmp_path / "submit.err"
    # said again every 2 s while no worker serves it (the default is every 10 s)
    cli_only = {"TRACE_SUBMIT_NO_WORKER_REPEAT_SECONDS": "2"}
    broker = supervisors.broker  # the supervisor factory's: its Redis and key prefix
    cli_env = {**env, **cli_only, "REDIS_URL": broker.settings.redis_url,
               "TRACEBUS_KEY_PREFIX": broker.keys.prefix}
    log.write_text("")
    proc = forked_cli.start("submit", "--profile", "query_tool", "--domains", "history", "--cids-file",
                            str(cid_file), "--wait", "--interval", "0.1", env=cli_env, err=log)
    try:
        wait_for(lambda: f"no worker serves queue {queue}:" in log.read_text(), 15,
                 message="the first warning")
        # and it keeps saying it while none does
        wait_for(lambda: f"no worker serves queue {queue} (for 0:0" in log.read_text(), 20,
                 message="the warning repeated")
        late = supervisors(processes=1, modules=("tracebus.trace.tasks",), **env)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
    late.kill()  # (the module's factory would only at the end of the module)
    assert proc.returncode == 0, log.read_text()
    assert " completed in " in out


def test_an_identical_submit_is_answered_from_the_stored_result_and_fresh_runs_it_again(trace, forked_cli):
    sup, env, cid_file = trace
    env = {**env, "TRACE_RESULT_REUSE_MAX_AGE_S": "-1"}  # reuse on, as by default (JOB_ENV turns it off)
    args = ("submit", "--profile", "query_tool", "--domains", "materials", "--cids-file", str(cid_file))
    first = forked_cli.cli(*args, "--wait", "--json", "--user", "reuse-a", env=env)
    assert first.code == 0, first

    second = forked_cli.cli(*args, "--user", "reuse-b", env=env)
    fresh = forked_cli.cli(*args, "--fresh", "--user", "reuse-b", env=env)

    assert second.code == 0 and "answered from the stored result res-" in second.err, second
    assert "--fresh runs it again" in second.err
    reused = service_for(env).status(second.out.split()[0])
    assert reused["state"] == "completed" and reused["reused_from"] and reused["user"] == "reuse-b"
    assert fresh.code == 0 and "stored result" not in fresh.err, fresh
    again = service_for(env).status(fresh.out.split()[0])
    assert again["reused_from"] is None and again["fresh"] is True
    assert json.loads(first.out)["job_id"] not in second.out + second.err
