"""``tracebus up [--port 8000] [--processes N] [--scale 1.0] [--data-dir ./var] [--source S]``: the whole system.

One ``up`` per data dir: a second one there is refused (``<data-dir>/up.lock`` names the
first's pid and port). Uses the Redis at ``REDIS_URL`` when it is set and answers (checked
first), otherwise starts a private redis-server with its files in ``<data-dir>/redis``
(loopback only, first free port from 6380, its own password in ``redis/password`` (0600),
AOF with ``appendfsync everysec``: the jobs survive a crash of it and a restart of ``up``);
generates ``<data-dir>/sample.db`` on first run; then runs the worker supervisor and the API under
gunicorn as child processes, in the foreground. With ``--source postgres`` (or
``TRACEBUS_SOURCE=postgres``) the sample lives in PostgreSQL instead: the server of
``TRACEBUS_POSTGRES_DSN`` when it is set (checked first, and never written to), otherwise a
private PostgreSQL started here (files in ``<data-dir>/postgres``, loopback only, first free port
from 5433, its password in ``postgres/password``, 0600; run as the ``postgres`` OS user when
``up`` runs as root), into which the sample is loaded on first run; its URL is kept in
``postgres/url`` (0600) for ``tracebus sample-data cids --db``. It waits for ``/readyz``, prints where to
point curl and which Redis it uses, records that Redis's URL in ``<data-dir>/redis.url``
(so the other commands run from the project find it; removed on exit), and stops everything on Ctrl-C or SIGTERM (SIGTERM to the children, a wait,
SIGKILL for leftovers). If a child dies it stops the rest and exits non-zero.

The data setup is :mod:`tracebus.commands._up_data`'s, the banner :mod:`tracebus.commands._up_banner`'s.
"""

from __future__ import annotations

import queue
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tracebus.commands._children import Children
from tracebus.commands._datadir import DataDirLock, redis_password
from tracebus.commands._environment import remove_redis_url, write_redis_url
from tracebus.commands._up_banner import banner
from tracebus.commands._up_data import UpData, say
from api.hosts import default_hosts
from api.settings import ApiSettings
from tracebus.engine.errors import BrokerConnectionError
from tracebus.errors import ConfigError
from tracebus.engine.connection import reachable, redact
from tracebus.redis_proc import RedisServer, pick_port, port_free

#: How long the system may take to answer /readyz after the children start.
READY_TIMEOUT_S = 60.0
RET_CHILD_DIED = 1


def add_parser(sub) -> None:
    p = sub.add_parser("up", help="run Redis, the workers and the API in the foreground",
                       description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8000, help="API port (default 8000)")
    p.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    p.add_argument("--processes", "-p", type=int, default=None,
                   help="worker processes (default: TRACE_WORKER_COUNT)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="size of the sample data generated on first run (1.0: ~114K trace CIDs)")
    p.add_argument("--source", choices=("sqlite", "postgres", "oracle"), default=None,
                   help="where the workers read: the SQLite sample, PostgreSQL (TRACEBUS_POSTGRES_DSN, else a "
                        "private server with the sample) or Oracle (default: TRACEBUS_SOURCE)")
    p.add_argument("--data-dir", default="./var",
                   help="home of sample.db and of the private Redis's files (default ./var)")
    # up decides its Redis itself (and writes var/redis.url): it never reads an old one
    p.set_defaults(func=run, find_redis_url=False, long_running=True)


def run(args, settings: ApiSettings) -> int:
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be 1..65535, got {args.port}")
    if not args.scale > 0:
        raise ConfigError(f"--scale must be > 0, got {args.scale}")
    processes = args.processes if args.processes is not None else settings.worker_count
    if processes < 1:
        raise ConfigError(f"--processes must be >= 1, got {processes}")
    if args.source is not None:
        settings = settings.replace(source=args.source)
    return Up(settings, args.host, args.port, processes, args.scale, Path(args.data_dir)).run()


class Up(UpData):
    """One foreground run: setup, watch, stop (the source's data: :class:`UpData`).

    Signal handlers only record the signal; the steps that cannot poll (generating the
    sample data) are made interruptible by letting the handler raise KeyboardInterrupt there.
    """

    def __init__(self, settings: ApiSettings, host: str, port: int, processes: int, scale: float,
                 data_dir: Path):
        self.settings, self.host, self.port, self.processes = settings, host, port, processes
        self.scale, self.data_dir = scale, data_dir.resolve()
        self.children = Children()
        self.lock = DataDirLock(self.data_dir)
        self.signals: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._interruptible = False
        self.redis_url, self.redis_kind, self.url_file = "", "", None
        self.redis_server: RedisServer | None = None  # the private one; restarted once if it dies
        self.redis_restarted = False
        self.postgres_dsn, self.cids_db = "", ""
        self.base_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"

    def _on_signal(self, signum: int, frame) -> None:
        self.signals.put(signum)
        if self._interruptible:
            raise KeyboardInterrupt

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.lock.acquire(self.port)  # before anything in the data dir is touched
            if not port_free(self.host, self.port):
                raise ConfigError(f"{self.host}:{self.port} is in use; pass --port")
            self.redis_url = self._redis_url()  # a dead REDIS_URL is said before minutes of data
            db = self._sample_data()
            self.url_file = write_redis_url(self.data_dir, self.redis_url)
            if self.settings.source == "postgres":
                self.postgres_dsn = self._postgres()
            env = ApiSettings.child_environ(self._child_env(self.redis_url, db))
            self._start_children(env)
            if not self._wait_ready():
                return RET_CHILD_DIED
            say(banner(self.base_url, self.cids_db or db, self.settings, self.processes, self.scale))
            say(f"Redis: {redact(self.redis_url)} ({self.redis_kind}); written to {self.url_file}, so tracebus "
                f"commands run in {self.data_dir.parent} (or below) use it.\n")
            return self._watch()
        except KeyboardInterrupt:
            say("tracebus up: interrupted, stopping")
            return 0
        finally:
            self._interruptible = False
            # A second Ctrl-C / SIGTERM while stopping skips the graceful waits.
            self.children.stop_all(hurry=lambda: not self.signals.empty())
            if self.url_file is not None:
                remove_redis_url(self.url_file, self.redis_url)
            self._drain_signals()
            self.lock.release()

    def _drain_signals(self) -> None:
        while not self.signals.empty():
            self.signals.get_nowait()

    # -- setup (the source's data: UpData) ---------------------------------------------------------
    def _redis_url(self) -> str:
        url = self.settings.redis_url
        if ApiSettings.is_set("REDIS_URL"):
            # Never a private server then: a host on its own Redis would be an island.
            if not reachable(url, timeout_s=3.0):
                # exit 1, as the README's "Redis unreachable" (a runtime failure, not a usage error)
                raise BrokerConnectionError(f"REDIS_URL {redact(url)} does not answer; start it or unset REDIS_URL")
            say(f"redis: using REDIS_URL {redact(url)}")
            self.redis_kind = "REDIS_URL"
            return url
        folder = self.data_dir / "redis"
        server = RedisServer(folder, port=pick_port(), password=redis_password(folder), aof=True, any_port=True)
        try:
            server.start()
        except RuntimeError as e:
            raise ConfigError(str(e)) from None
        self.children.adopt("redis-server", server.process, stop_timeout_s=10)
        self.redis_server = server
        say(f"redis: started a private redis-server at {redact(server.url)} (files in {server.directory}, "
            "password in its password file)")
        self.redis_kind = f"a private redis-server, files in {server.directory}"
        return server.url

    def _child_env(self, redis_url: str, db: Path | None) -> dict[str, str]:
        env = {"REDIS_URL": redis_url, "TRACEBUS_API_BIND": f"{self.host}:{self.port}",
               "TRACE_WORKER_COUNT": str(self.processes), "PYTHONUNBUFFERED": "1",
               # the API's gunicorn workers keep their HTTP metrics here (GET /metrics sums them)
               "TRACEBUS_METRICS_DIR": self.settings.metrics_dir or str(self.data_dir / "metrics"),
               # nothing trusted unless TRACEBUS_TRUSTED_PROXIES says so (an empty value too: the
               # banner says which); the Host must be a name of what it binds (DNS rebinding)
               "TRACEBUS_TRUSTED_PROXIES": self.settings.trusted_proxies,
               "TRACEBUS_API_ALLOWED_HOSTS": self.settings.api_allowed_hosts or default_hosts(self.host)}
        if db is not None:
            env["TRACEBUS_SQLITE_PATH"] = str(db)
        env["TRACEBUS_SOURCE"] = self.settings.source
        if self.postgres_dsn:
            env["TRACEBUS_POSTGRES_DSN"] = self.postgres_dsn
        return env

    def _start_children(self, env: dict[str, str]) -> None:
        import api.app

        s = self.settings
        self.children.start(
            "worker supervisor",
            [sys.executable, "-m", "tracebus", "worker", "tracebus.trace.tasks",
             "--processes", str(self.processes), "--queues", s.queue],
            env, stop_timeout_s=s.graceful_timeout_s + 10)
        conf = Path(api.app.__file__).resolve().parent / "gunicorn.conf.py"
        self.children.start("API (gunicorn)", [sys.executable, "-m", "gunicorn", "-c", str(conf)],
                            env, stop_timeout_s=s.api_graceful_timeout_s + 10)

    def _wait_ready(self) -> bool:
        deadline, last = time.monotonic() + READY_TIMEOUT_S, "no answer"
        while time.monotonic() < deadline:
            if not self.signals.empty():
                raise KeyboardInterrupt
            if self._child_died():
                return False
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return True
            except urllib.error.HTTPError as e:
                last = e.read().decode(errors="replace")
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        say(f"tracebus up: not ready after {READY_TIMEOUT_S:.0f} s (/readyz: {last}); stopping")
        return False

    # -- foreground ---------------------------------------------------------------------------------
    def _watch(self) -> int:
        while True:
            try:
                signum = self.signals.get(timeout=0.5)
            except queue.Empty:
                if self._child_died():
                    return RET_CHILD_DIED
                continue
            say(f"tracebus up: {signal.Signals(signum).name}, stopping")
            return 0

    def _child_died(self) -> bool:
        dead = self.children.first_exited()
        if dead is None:
            return False
        if dead.name == "redis-server" and self.redis_server is not None and not self.redis_restarted:
            return not self._restart_redis(dead)
        say(f"tracebus up: the {dead.name} {dead.describe_exit()} (see its output above); "
            "stopping the rest", )
        return True

    def _restart_redis(self, dead) -> bool:
        """Start the private redis-server again, once, on its port (its AOF keeps the data; the
        other processes back off meanwhile and go on). False when it does not start."""
        self.redis_restarted = True
        say(f"tracebus up: the redis-server {dead.describe_exit()}; starting it again on port "
            f"{self.redis_server.port} (its AOF keeps the jobs; once: should it die again, up stops)")
        self.children.children.remove(dead)
        try:
            self.redis_server.start()
        except RuntimeError as e:
            say(f"tracebus up: the redis-server did not start again: {e}; stopping the rest")
            return False
        self.children.adopt("redis-server", self.redis_server.process, stop_timeout_s=10)
        return True
