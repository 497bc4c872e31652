"""The command line as a newcomer types it: global options after the action, a stray option
refused with its own command's usage, ``jobs``/``dead`` listing without an action (as
``queues``), one-line errors with exit code 2 for bad input (an unknown station, a CID count
over the limit, an --out folder that does not exist), 130 for a Ctrl-C'd ``status --watch``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.clitools import ROOT, clean_env, run_cli
from tests.helpers import interruptible


def test_global_options_go_after_the_action_too(redis_url, redis_client):
    env = {"TRACEBUS_KEY_PREFIX": f"usage{os.getpid()}"}
    for argv in (("jobs", "list"), ("dead", "list"), ("queues", "pause", "trace-events"),
                 ("queues", "resume", "trace-events"), ("jobs", "list", "--json")):
        result = run_cli(*argv, "--redis-url", redis_url, env=env)
        assert result.code == 0, (argv, result)
        assert "unrecognized" not in result.err


def test_jobs_and_dead_list_without_an_action_as_queues_does(redis_url, redis_client):
    env = {"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": f"usage{os.getpid()}"}
    for command in ("jobs", "dead", "queues"):
        bare, listed = run_cli(command, env=env), run_cli(command, "list", env=env)
        assert bare.code == listed.code == 0, (command, bare, listed)
        assert bare.out == listed.out, command


def test_a_stray_option_is_refused_with_its_commands_usage():
    for argv, usage in ((("status", "--bogus"), "usage: tracebus status"),
                        (("jobs", "show", "x", "--bogus"), "usage: tracebus jobs show"),
                        (("queues", "pause", "q", "--nope"), "usage: tracebus queues pause")):
        result = run_cli(*argv, env={})
        assert result.code == 2, (argv, result)
        assert result.err.startswith(usage) and "unrecognized arguments: --" in result.err, (argv, result.err)


def test_bad_input_is_one_line_and_exit_2(redis_url, redis_client, sample_db, tmp_path):
    env = {"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": f"usage{os.getpid()}", "TRACE_EVENTS_CID_LIMIT": "5",
           "TRACEBUS_SQLITE_PATH": str(sample_db)}
    cids = tmp_path / "cids.txt"
    cids.write_text("\n".join(f"CID{i:04d}" for i in range(6)))
    missing = tmp_path / "nope" / "deeper" / "x.db"
    for argv, expected in ((("sample-data", "cids", "--db", str(sample_db), "--station", "Mars"), "'Mars'"),
                           (("submit", "--profile", "query_tool", "--domains", "history", "--cids-file", str(cids)),
                            "5"),
                           (("sample-data", "--scale", "0.01", "--out", str(missing)), "does not exist")):
        result = run_cli(*argv, env=env)
        assert result.code == 2 and result.out == "" and result.err.count("\n") == 1, (argv, result)
        assert expected in result.err, (argv, result.err)
    assert not (tmp_path / "nope").exists()  # no folders made for a typo


def test_status_shows_the_queue_columns_as_queues_names_them(redis_url, redis_client):
    env = {"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": f"usage{os.getpid()}"}
    status, queues = run_cli("status", env=env), run_cli("queues", env=env)
    assert "WAITING  RUNNING" in status.out and "WAITING  RUNNING" in queues.out, (status.out, queues.out)
    assert "LENGTH" not in status.out and "PENDING" not in status.out


def test_a_ctrl_c_ends_status_watch_with_130(redis_url, redis_client):
    env = clean_env(REDIS_URL=redis_url, TRACEBUS_KEY_PREFIX=f"usage{os.getpid()}", PYTHONUNBUFFERED="1")
    watch = subprocess.Popen([sys.executable, "-m", "tracebus", "status", "--watch", "0.2"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, preexec_fn=interruptible)
    assert "QUEUES" in watch.stdout.readline() + watch.stdout.readline() + watch.stdout.readline()
    watch.send_signal(signal.SIGINT)
    _, err = watch.communicate(timeout=20)
    assert watch.returncode == 130 and "Traceback" not in err, err


def test_the_help_names_every_format_fetch_saves():
    result = run_cli("--help", env={})
    entry = result.out[result.out.index("    fetch "):result.out.index("    jobs ")]  # wrapped lines too
    for fmt in ("NDJSON", "msgpack", "Parquet", "Arrow", "CSV"):
        assert fmt in entry, entry
