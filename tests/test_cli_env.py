"""The CLI's global conventions, run as real processes: where the Redis URL comes from
(``--redis-url`` > ``REDIS_URL`` > ``--env-file`` > ``var/redis.url`` > default), one-line
errors for bad URLs and files, and output into a closed pipe ending quietly (exit 141).

Most commands run forked from a server that has imported the CLI (the ``tracebus`` fixture,
:class:`tests.clitools.ForkedCli`: real processes, without an interpreter start each); the
stale URL file and the closed pipes run as fresh ``python -m tracebus`` processes, which also
shows that the start itself writes nothing to stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.clitools import ROOT, clean_env, run_cli
from tracebus.trace.service import TraceService


def tracebus_process(*argv: str, cwd=ROOT, **env: str) -> subprocess.CompletedProcess:
    """``python -m tracebus ARGV``, a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "tracebus", *argv], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def tracebus(forked_cli):
    """``tracebus(*argv, cwd=ROOT, **env)``: as :func:`tracebus_process`, forked from the session's
    server that has imported the CLI."""
    return lambda *argv, cwd=ROOT, **env: forked_cli.run(*argv, cwd=cwd, env=env)


def source_of(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["redis"]


def test_the_redis_url_precedence(tracebus, tmp_path, redis_url, redis_client):
    project = tmp_path / "project"
    (project / "var").mkdir(parents=True)
    (project / "deep" / "er").mkdir(parents=True)
    dead = "redis://127.0.0.1:1/0"

    # nothing set anywhere: the default, named in the answer or in the error
    proc = tracebus("status", "--json", cwd=project)
    assert "[Redis URL from default]" in proc.stderr or source_of(proc)["source"] == "default"

    # var/redis.url, found from the project folder and below
    (project / "var" / "redis.url").write_text(redis_url + "\n")
    for where in (project, project / "deep" / "er"):
        assert source_of(tracebus("status", "--json", cwd=where)) == {
            "url": redis_url, "source": str(project / "var" / "redis.url")}

    # an env file wins over it; the environment wins over the env file; the flag wins over all
    env_file = tmp_path / "tracebus.env"
    env_file.write_text(f'# comment\nREDIS_URL="{redis_url}"\nTRACEBUS_KEY_PREFIX=fromfile\n')
    doc = source_of(tracebus("status", "--json", "--env-file", str(env_file), cwd=project))
    assert doc == {"url": redis_url, "source": f"--env-file {env_file}"}
    env_file.write_text(f"REDIS_URL={dead}\n")
    proc = tracebus("--env-file", str(env_file), "status", cwd=project)
    assert proc.returncode == 1 and f"[Redis URL from --env-file {env_file}]" in proc.stderr
    doc = source_of(tracebus("--env-file", str(env_file), "status", "--json", cwd=project, REDIS_URL=redis_url))
    assert doc["source"] == "REDIS_URL"
    doc = source_of(tracebus("status", "--json", "--redis-url", redis_url, "--env-file", str(env_file),
                             cwd=project, REDIS_URL=dead))
    assert doc == {"url": redis_url, "source": "--redis-url"}


def test_a_stale_redis_url_file_is_one_line_with_a_hint(tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "redis.url").write_text("redis://127.0.0.1:1/0\n")
    proc = tracebus_process("status", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is `tracebus up` still running?" in proc.stderr


def test_the_env_file_sets_other_settings_too(tmp_path, redis_url, settings):
    env_file = tmp_path / "tracebus.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nTRACEBUS_KEY_PREFIX={settings.key_prefix}\n")
    import tests.actors  # noqa: F401
    from tracebus.engine.broker import Broker
    broker = Broker(settings)
    broker.declare_queue("from-env-file")
    broker.close()
    result = run_cli("queues", "--env-file", str(env_file), env={})
    assert result.code == 0 and "from-env-file" in result.out, result


@pytest.mark.parametrize("url, expected", [
    ("redis+sentinel://127.0.0.1:26379", "must name the master"),
    ("localhost:6379", "must start with redis://"),
    ("redis://127.0.0.1:99999/0", "Port out of range"),
])
def test_a_bad_redis_url_is_one_line_and_exit_2(tracebus, url, expected):
    for argv in (("status",), ("queues",), ("--redis-url", url, "dead", "list")):
        proc = tracebus(*argv, REDIS_URL=url)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1 and expected in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("content, expected", [(None, "cannot read"), ("REDIS_URL\n", "line 1: expected NAME=value")])
def test_a_bad_env_file_is_one_line_and_exit_2(tracebus, tmp_path, content, expected):
    path = tmp_path / "bad.env"
    if content is not None:
        path.write_text(content)
    proc = tracebus("status", "--env-file", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and expected in proc.stderr


def test_sample_data_cids_outside_the_project_is_one_line(tracebus, tmp_path):
    proc = tracebus("sample-data", "cids", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "no sample database at var/sample.db" in proc.stderr and "run from the project folder" in proc.stderr


# -- a closed output pipe (``| head``) ------------------------------------------------------------------
def closed_pipe(*argv: str, **env: str) -> tuple[int, str]:
    """Run with stdout a pipe whose reader has gone (as after ``head`` exited)."""
    proc = subprocess.Popen([sys.executable, "-m", "tracebus", *argv], cwd=ROOT, env=clean_env(**env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command writes a byte
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


def test_closed_pipes_end_quietly(sample_db, settings, broker, redis_url):
    code, err = closed_pipe("sample-data", "cids", "--db", str(sample_db))
    assert (code, err) == (141, "")

    service = TraceService(settings.replace(chunk_cids=1), broker)
    job_id = service.submit(service.parse({"profile": "query_tool", "domains": ["history"],
                                           "container_ids": [f"C{i:05d}" for i in range(300)]}, "u"))
    env = {"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": settings.key_prefix}
    code, err = closed_pipe("jobs", "show", job_id, "--units", **env)
    assert (code, err) == (141, "")
    code, err = closed_pipe("status", "--watch", "0.05", **env)
    assert (code, err) == (141, "")


# -- one rule for which Redis: REDIS_URL, else the project's redis.url, else an error (issue 36) --
def library_url(cwd) -> subprocess.CompletedProcess:
    """The Redis URL the library's own broker takes in ``cwd`` (REDIS_URL unset)."""
    code = "from tracebus.engine.actor import get_broker; print(get_broker().settings.redis_url)"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=clean_env(PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=60)


def test_a_project_whose_up_is_not_running_is_an_error_never_the_default(tracebus, tmp_path, redis_url,
                                                                           sample_db):
    project = tmp_path / "project"
    (project / "var").mkdir(parents=True)
    (project / "var" / "sample.db").symlink_to(sample_db)  # up ran here once, and stopped
    deep = project / "deep"
    deep.mkdir()

    proc = tracebus("jobs", cwd=deep)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{project / 'var' / 'redis.url'} is absent: `tracebus up` is not running" in proc.stderr
    lib = library_url(deep)
    assert lib.returncode == 1 and "`tracebus up` is not running in this project" in lib.stderr
    # commands that need no Redis still run, and find the data dir's database from below
    cids = tracebus("sample-data", "cids", cwd=deep)
    assert cids.returncode == 0 and len(cids.stdout.split()) > 100, cids.stderr

    # with up running (its redis.url), the library and the CLI use its Redis from anywhere below
    (project / "var" / "redis.url").write_text(redis_url + "\n")
    assert library_url(deep).stdout.strip() == redis_url
    assert source_of(tracebus("status", "--json", cwd=deep))["url"] == redis_url
    # outside a project the default stands
    assert library_url(tmp_path).stdout.strip() == "redis://127.0.0.1:6379/0"


def test_a_worker_follows_redis_url_when_up_moves_its_redis(tmp_path):
    from tests import actors
    from tests.helpers import wait_for
    from tests.redis_server import RedisServer
    from tracebus.engine.actor import set_broker
    from tracebus.engine.broker import Broker
    from tracebus.engine.settings import Settings

    project = tmp_path / "project"
    (project / "var").mkdir(parents=True)
    url_file = project / "var" / "redis.url"
    first = RedisServer(tmp_path / "first").start()
    url_file.write_text(first.url + "\n")
    log, pinned_log = tmp_path / "worker.log", tmp_path / "pinned.log"
    workers = []
    for path, extra in ((log, {}), (pinned_log, {"REDIS_URL": first.url})):  # the second given REDIS_URL
        with open(path, "wb") as out:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "tracebus", "worker", "tests.actors", "--processes", "1", "--queues", "tests"],
                cwd=project, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env=clean_env(PYTHONPATH=str(ROOT), TRACEBUS_BLOCK_MS="100", TRACEBUS_GRACEFUL_TIMEOUT_SECONDS="5",
                              **extra)))
    second = None
    try:
        for path in (log, pinned_log):
            wait_for(lambda: "started 1 workers" in path.read_text(), 30, message="the worker pool")
        first.stop()  # up stopped; it starts again with a Redis on another port
        second = RedisServer(tmp_path / "second").start()
        url_file.write_text(second.url + "\n")
        wait_for(lambda: "Redis moved" in log.read_text(), 30, message="the supervisor to see the move")
        # the one given REDIS_URL says where Redis went, once, and stays (the operator's choice)
        wait_for(lambda: "Redis moved? " in pinned_log.read_text(), 30, message="the pinned pool to say so")
        assert "restart this pool with that REDIS_URL" in pinned_log.read_text()
        broker = Broker(Settings.from_env({}, redis_url=second.url))
        set_broker(broker)
        try:  # the pool on the new Redis runs what is sent there
            assert actors.add.send(2, 40).get_result(block=True, timeout=30_000) == 42
        finally:
            set_broker(None)
            broker.close()
        text = log.read_text()
        assert text.count("Redis moved") == 1 and second.url.split("@")[-1] in text
        assert pinned_log.read_text().count("Redis moved? ") == 1
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        if second is not None:
            second.stop()
        first.stop()


def test_a_wrong_or_missing_redis_password_says_authentication_failed(tracebus, tmp_path):
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis", password="right-pass").start()
    try:
        wrong = server.url.replace("right-pass", "wrong-pass")
        none = server.url.replace(":right-pass@", "")
        for url in (wrong, none):
            proc = tracebus("status", "--redis-url", url)
            assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
            assert "Redis authentication failed" in proc.stderr and "unreachable" not in proc.stderr
            assert "wrong-pass" not in proc.stderr  # the URL is shown redacted
        assert tracebus("status", "--redis-url", server.url).returncode == 0
        # up given that REDIS_URL says the same, not that the Redis does not answer
        from tests.redis_server import free_port

        up = tracebus_process("up", "--port", str(free_port()), "--data-dir", str(tmp_path / "var"),
                              cwd=tmp_path, REDIS_URL=wrong)
        assert up.returncode == 1 and "Redis authentication failed" in up.stderr + up.stdout, up
        assert "does not answer" not in up.stderr + up.stdout
    finally:
        server.stop()
