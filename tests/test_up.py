"""``tracebus up`` as a user runs it: a subprocess that starts Redis, workers and gunicorn.

The printed curl example is run as printed (bash), the job it submits completes, and
SIGTERM stops every process ``up`` started. When a child dies, ``up`` stops the rest and
exits non-zero; its private Redis is started again once first.

The tests of a normal run share one ``up`` (``shared_up``, its own redis-server): each checks
another thing of it (the example, a second ``up`` refused, its Redis's configuration); the last
of them kills its Redis (up starts it again), kills it again (up stops), starts ``up`` again at
once on the same data dir and port, and stops that one with SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import psutil
import pytest
import redis

from tests.helpers import wait_for
from tracebus.engine.connection import redact
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent


class Up:
    """A ``tracebus up`` process with its output in a file."""

    def __init__(self, tmp_path: Path, *args: str, port: int | None = None, **env: str):
        self.home = tmp_path  # the cwd; the data dir is home/var
        self.port = port or free_port()
        self.log_path = next(tmp_path / name for name in ("up.log", *(f"up-{i}.log" for i in range(2, 99)))
                             if not (tmp_path / name).exists())
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
        base.update(TRACEBUS_GRACEFUL_TIMEOUT_SECONDS="5", TRACEBUS_API_GRACEFUL_TIMEOUT_SECONDS="5",
                    TRACEBUS_API_WORKERS="1", TRACEBUS_LOG_LEVEL="warning", PYTHONUNBUFFERED="1", **env)
        argv = [sys.executable, "-m", "tracebus", "up", "--port", str(self.port), "--processes", "1",
                "--data-dir", str(tmp_path / "var"), *args]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(argv, cwd=tmp_path, env=base, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.base_url = f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = 60) -> None:
        def ready():
            assert self.process.poll() is None, f"tracebus up exited\n{self.output()[-4000:]}"
            return "Ctrl-C stops everything" in self.output()  # printed after /readyz answered 200
        wait_for(ready, timeout_s, interval_s=0.1,
                 message=f"tracebus up to be ready\n{self.output()[-2000:]}")

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def get(self, path: str) -> dict:
        """The answer; of a dashboard route (in the original's envelope by default), its ``data``."""
        req = urllib.request.Request(self.base_url + path)  # as the banner's curl and the monitor
        with urllib.request.urlopen(req, timeout=10) as resp:
            doc = json.load(resp)
        if path.startswith("/api/trace/"):
            assert doc["success"] is True, doc
            return doc["data"]
        return doc

    def gunicorn(self) -> psutil.Process:
        """The gunicorn master (a direct child)."""
        children = psutil.Process(self.process.pid).children()
        return next(p for p in children if "gunicorn" in " ".join(p.cmdline()))

    def kill(self) -> None:
        """Teardown: whatever is left of the run."""
        if self.process.poll() is None:
            for proc in [psutil.Process(self.process.pid), *self.descendants()]:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
        self.process.wait()


@contextlib.contextmanager
def ready_up(home: Path, *args: str, **env: str) -> Iterator[Up]:
    """A ready ``tracebus up`` in ``home`` (``Up``'s arguments); killed, with what is left of it, on exit."""
    run = Up(home, *args, **env)
    try:
        run.wait_ready()
        yield run
    finally:
        run.kill()


def run_the_example(run: Up, timeout_s: float) -> dict:
    """Run the banner's example: its job completes and pages; returns the 202's data."""
    accepted = submit_example(run)
    assert accepted["async"] is True and accepted["cid_count"] > 1000, accepted
    wait_for(lambda: run.get(accepted["status_url"])["status"] == "completed", timeout_s, interval_s=0.2,
             message="the example's job to complete")
    page = run.get(accepted["result_url"] + "?domain=upstream_history&limit=5")
    assert page["count"] == 5 and page["total"] > 5
    return accepted


@pytest.fixture
def up(tmp_path):
    """Factory: ``up(*args, home=tmp_path, port=None, **env)`` starts ``tracebus up`` in ``home``
    (data dir ``home/var``); whatever is left of each is killed at teardown."""
    started: list[Up] = []

    def start(*args: str, home: Path | None = None, port: int | None = None, **env: str) -> Up:
        run = Up(home or tmp_path, *args, port=port, **env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


#: How the shared ``up`` and its restart run: the example's 1,140 CIDs are above the threshold.
SHARED_ARGS, SHARED_ENV = ("--scale", "0.01"), {"TRACE_ASYNC_CID_THRESHOLD": "100"}


@pytest.fixture(scope="module")
def shared_up(tmp_path_factory):
    """One ready ``tracebus up --scale 0.01`` with its own redis-server, for the tests of a normal
    run; the last of them (test_ups_private_redis_...) kills its Redis."""
    with ready_up(tmp_path_factory.mktemp("up"), *SHARED_ARGS, **SHARED_ENV) as run:  # no REDIS_URL: its own redis-server
        yield run


def gone(procs: list[psutil.Process]) -> bool:
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def test_up_runs_everything_and_the_curl_example_works(shared_up, forked_cli):
    assert shutil.which("curl"), "the example uses curl"
    run, home = shared_up, shared_up.home
    out = run.output()
    assert "redis: started a private redis-server at redis://:***@127.0.0.1:" in out
    assert (home / "var" / "sample.db").exists() and (home / "var" / "redis" / "redis.log").exists()

    accepted = run_the_example(run, 60)
    # the monitor's page (the same anonymous caller) lists the example's job
    assert accepted["job_id"] in [j["job_id"] for j in run.get("/api/v1/jobs")["jobs"]]
    assert run.get("/api/v1/me")["user"] == "anon:127.0.0.1"
    assert f"The monitor, {run.base_url}/ui, shows these jobs" in out

    # the Redis it serves is recorded for the commands run from the project, and said
    url = (home / "var" / "redis.url").read_text().strip()
    assert url.startswith("redis://:") and "@127.0.0.1:" in url
    wait_for(lambda: f"Redis: {redact(url)} (a private redis-server" in run.output(), 5, message="the Redis line")
    assert ":***@" in redact(url) and url.split("@")[0].split(":")[-1] not in run.output()  # its password, never shown
    (home / "sub").mkdir()
    status = forked_cli.run("status", "--json", cwd=home / "sub", env={}, timeout_s=30)  # no REDIS_URL
    assert status.returncode == 0 and len(json.loads(status.stdout)["workers"]) == 1, status.stderr

    # the commands are the page's caller (issue 36): sample-data cids finds the data dir's
    # database from below it, and a submit through the library is listed by the API and monitor
    cids = forked_cli.run("sample-data", "cids", cwd=home / "sub", env={}, timeout_s=30)
    assert cids.returncode == 0 and len(cids.stdout.split()) > 100, cids.stderr
    (home / "sub" / "cids.txt").write_text(cids.stdout)
    submitted = forked_cli.run("submit", "--cids-file", "cids.txt", "--profile", "query_tool", "--domains",
                               "history", cwd=home / "sub", env={}, timeout_s=30)
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.strip() in [j["job_id"] for j in run.get("/api/v1/jobs")["jobs"]]

    commands = [" ".join(p.cmdline()) for p in run.descendants()]
    assert any("redis-server" in c for c in commands) and any("gunicorn" in c for c in commands)
    assert sum("tracebus worker" in c for c in commands) == 2  # the supervisor and its one worker
    # (SIGTERM stopping it all: at the end of test_ups_private_redis_..., on the restarted up)


def test_up_exits_non_zero_when_a_child_dies_and_stops_the_rest(up, tmp_path, redis_server, sample_db):
    (tmp_path / "var").mkdir()
    shutil.copy(sample_db, tmp_path / "var" / "sample.db")  # reused, not generated
    run = up(REDIS_URL=redis_server.url, TRACEBUS_KEY_PREFIX=f"up{os.urandom(3).hex()}")
    run.wait_ready()
    assert f"redis: using REDIS_URL {redis_server.url}" in run.output()
    assert "data: using" in run.output()
    family = run.descendants()

    run.gunicorn().kill()

    assert run.process.wait(timeout=30) == 1
    assert "the API (gunicorn) was killed by SIGKILL" in run.output()
    assert wait_for(lambda: gone(family), 10, message="every child of tracebus up to exit")


def test_up_refuses_a_port_in_use(up, tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        run = up("--scale", "0.01", port=busy.getsockname()[1])
        assert run.process.wait(timeout=30) == 2
    assert "is in use; pass --port" in run.output()


def test_up_stops_cleanly_on_sigterm_before_it_is_ready(up, tmp_path):
    run = up("--scale", "0.05")  # generating takes a few seconds: SIGTERM lands during it
    wait_for(lambda: "data: generating" in run.output(), 20, message="generation to start")

    run.process.send_signal(signal.SIGTERM)

    assert run.process.wait(timeout=20) == 0
    assert not (tmp_path / "var" / "sample.db").exists()  # no half-written database
    assert not list((tmp_path / "var").glob(".sample.db.*"))
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(run.base_url + "/healthz", timeout=1)


def test_a_signal_before_the_generation_starts_stops_up_without_generating(tmp_path):
    # SIGTERM right after "data: generating" may land before the generation is interruptible
    # (during its gc.collect()): up must stop there, not generate all of it first (seconds)
    import time

    from api.settings import ApiSettings
    from tracebus.commands.up import Up as UpRun

    (tmp_path / "var").mkdir()
    run = UpRun(ApiSettings.from_env({}), "127.0.0.1", free_port(), 1, 0.2, tmp_path / "var")  # 3 s or more
    run.signals.put(signal.SIGTERM)  # as its handler records one
    # CPU seconds, not wall time: a loaded machine stretches the latter (3.4 s once in CI-like
    # runs) while the generation it guards against costs seconds of this process's own CPU.
    started = time.process_time()
    with pytest.raises(KeyboardInterrupt):
        run._sample_data()
    assert time.process_time() - started < 1.0
    assert not (tmp_path / "var" / "sample.db").exists()


def test_up_never_starts_a_private_redis_when_redis_url_is_set_but_down(up, tmp_path):
    run = up("--scale", "0.01", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert run.process.wait(timeout=60) == 1  # README: 1, a runtime failure (Redis unreachable)
    out = run.output()
    assert "does not answer; start it or unset REDIS_URL" in out
    assert not (tmp_path / "var" / "up.lock").exists()  # a stopped up leaves no lock file
    assert "private redis-server" not in out and "Traceback" not in out
    assert "data: generating" not in out and not (tmp_path / "var" / "sample.db").exists()  # said first


def submit_example(run: "Up") -> dict:
    """Run the banner's curl example as printed; the 202 it answers (the ``data`` of its envelope)."""
    out = run.output()
    example = out[out.index("Submit the"):out.index("Then, with the job_id")].splitlines()[1:]
    result = subprocess.run(["bash", "-c", "\n".join(example)], capture_output=True, text=True, timeout=60)
    answer = json.loads(result.stdout)
    assert answer["success"] is True, answer
    return answer["data"]


def test_a_second_up_on_the_same_data_dir_is_refused_and_deletes_nothing(up, shared_up):
    first = shared_up
    url_file = first.home / "var" / "redis.url"
    url = url_file.read_text()

    second = up("--scale", "0.01", home=first.home)  # same --data-dir, another port
    assert second.process.wait(timeout=30) == 2, second.output()
    lines = second.output().strip().splitlines()
    assert len(lines) == 1, lines
    assert f"pid {first.process.pid}" in lines[0] and f"API port {first.port}" in lines[0], lines
    assert "--data-dir" in lines[0] and "Traceback" not in lines[0]

    assert url_file.read_text() == url  # the first's Redis is still the project's
    assert first.process.poll() is None and first.get("/readyz")
    assert len(list((first.home / "var" / "redis").glob("*.log"))) == 1  # no second redis-server there


def status_or_none(run: "Up", path: str) -> str | None:
    """A job's status, or None while the API cannot answer (its Redis restarting)."""
    try:
        return run.get(path)["status"]
    except OSError:  # urllib's HTTPError (503) and URLError are OSErrors
        return None


def redis_of(run: "Up") -> psutil.Process:
    return next(p for p in run.descendants() if "redis-server" in " ".join(p.cmdline()))


def aof_bytes(var: Path) -> bytes:
    """Everything in the private Redis's append-only files (Redis 7: redis/appendonlydir/)."""
    return b"".join(f.read_bytes() for f in sorted((var / "redis").rglob("*.aof*")) if f.is_file())


def test_ups_private_redis_is_durable_private_and_a_job_survives_its_kill_9_and_sigterm_stops_it_all(up, shared_up):
    import redis

    run = shared_up
    var = run.home / "var"
    url = (var / "redis.url").read_text().strip()
    for secret in (var / "redis.url", var / "redis" / "password"):
        assert secret.stat().st_mode & 0o777 == 0o600, secret
    client = redis.Redis.from_url(url, socket_timeout=5)
    config = client.config_get("*")
    assert (config["appendonly"], config["appendfsync"], config["bind"]) == ("yes", "everysec", "127.0.0.1")
    assert config["requirepass"] and config["requirepass"] in url
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=client.connection_pool.connection_kwargs["port"],
                    socket_timeout=5).ping()
    assert "appendonly no" not in run.output()  # up does not warn about its own configuration

    accepted = submit_example(run)
    assert accepted["async"] is True, accepted
    wait_for(lambda: run.get(accepted["status_url"])["status"] in ("running", "completed"), 30, interval_s=0.1,
             message="the job to start")
    # kill -9 ends the process, not the machine: what Redis wrote to its AOF file survives it.
    # appendfsync everysec may hold a write back (up to 2 s, behind a slow fsync): wait until a
    # marker written after the job started is in the file, so everything before it is too.
    marker = f"up-test-marker-{os.urandom(4).hex()}"
    client.set(marker, "1")
    client.close()
    wait_for(lambda: marker.encode() in aof_bytes(var), 10, interval_s=0.05, message="the marker in the AOF")
    redis_of(run).kill()
    # up starts its Redis again, once, and the job completes on it (issue 36)
    wait_for(lambda: "starting it again on port" in run.output(), 30, message="up to restart its Redis")
    wait_for(lambda: status_or_none(run, accepted["status_url"]) == "completed", 90, interval_s=0.3,
             message=f"the job to complete after its Redis restarted\n{run.output()[-3000:]}")
    assert run.process.poll() is None and "redis-server was killed by SIGKILL" in run.output()
    # one line when Redis goes and one when it is back, per process (no "back", "unreachable", "back");
    # a process may say "back" after the job completed (it may have completed before the kill)
    loop = r"\[(\d+)\] [\w.]+: ([^:]+(?::[\w:]+)?): "
    gone_ = set(re.findall(loop + "Redis unreachable", run.output()))
    wait_for(lambda: gone_ <= set(re.findall(loop + "Redis back after", run.output())), 30,
             message=f"a 'back' line of every process that said Redis went\n{run.output()[-3000:]}")
    backs = re.findall(loop + "Redis back after", run.output())
    assert gone_ and len(backs) == len(set(backs)), run.output()[-4000:]
    redis_of(run).kill()  # a second death stops it all
    assert run.process.wait(timeout=60) == 1
    assert run.output().count("redis-server was killed by SIGKILL") == 2

    # up starts again at once on the same port (the last run's connections in TIME-WAIT do not hold it)
    again = up(*SHARED_ARGS, home=run.home, port=run.port, **SHARED_ENV)
    again.wait_ready()
    page = again.get(accepted["result_url"] + "?domain=upstream_history&limit=5")
    assert page["count"] == 5 and page["total"] > 5

    # SIGTERM stops every process up started, and removes the URL file of its Redis
    url_file = var / "redis.url"
    assert url_file.exists()
    family = again.descendants()
    commands = [" ".join(p.cmdline()) for p in family]
    assert any("redis-server" in c for c in commands) and any("gunicorn" in c for c in commands)
    assert sum("tracebus worker" in c for c in commands) == 2  # the supervisor and its one worker
    again.process.send_signal(signal.SIGTERM)

    assert again.process.wait(timeout=30) == 0, again.output()[-3000:]
    assert wait_for(lambda: gone(family), 10, message="every child of tracebus up to exit")
    assert "stopping" in again.output()
    assert not url_file.exists()  # its Redis is gone: no stale URL left for the commands


def test_ups_private_servers_take_another_port_when_their_first_free_one_is_bound_before_them(tmp_path):
    # Parallel `up`s (the suite's xdist workers) pick the same first free port and one of them
    # loses the bind: up's servers take the port as a preference (any_port), the tests' do not.
    from tracebus.pg_proc import PostgresServer
    from tracebus.redis_proc import RedisServer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        redis_server = RedisServer(tmp_path / "redis", port=port, aof=True, any_port=True).start()
        try:
            assert redis_server.port != port and redis.Redis.from_url(redis_server.url).ping()
        finally:
            redis_server.stop()
        with pytest.raises(RuntimeError, match="did not start"):
            RedisServer(tmp_path / "fixed", port=port).start(timeout_s=5)
        pg = PostgresServer(port=port, any_port=True).start()  # a temp folder the postgres user reaches
        try:
            assert pg.port != port
        finally:
            pg.stop()
