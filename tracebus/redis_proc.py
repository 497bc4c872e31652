"""A private redis-server process: used by the test suite, bench/ and ``tracebus up``.

Binds port 0 to find a free port (or takes the one given: ``tracebus up`` uses
:func:`pick_port`, the first free one from 6380), starts ``redis-server`` with its files in
a directory and its log in a file (never an undrained pipe), waits on a monotonic deadline
until it answers as itself with its dataset loaded (a restart reloads its AOF), and stops it
with SIGTERM -> wait -> SIGKILL. :func:`reachable` tells whether a Redis answers at a URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import redis


#: First port ``tracebus up`` tries for its own server (6379 is left to a system Redis).
FIRST_UP_PORT = 6380


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    """True when ``host:port`` can be bound (nothing listens there). With SO_REUSEADDR, as the
    servers bind it: a connection of a stopped run in TIME-WAIT does not hold the port."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def pick_port(first: int = FIRST_UP_PORT, tries: int = 20) -> int:
    """The first free port in ``first .. first + tries - 1``, else any free port."""
    for port in range(first, first + tries):
        if port_free("127.0.0.1", port):
            return port
    return free_port()


class RedisServer:
    """One redis-server process on a free port with its data in ``directory``.

    Args:
        password(str | None): ``requirepass``, given in a 0600 config file in ``directory``
            (never on the command line, where ``ps`` shows it); ``url`` then carries it.
        aof(bool): durable: ``appendonly yes`` with ``appendfsync everysec`` (what ``up``
            runs), instead of no persistence at all (the tests' servers).
    """

    def __init__(self, directory: Path, extra_args: tuple[str, ...] = (), port: int | None = None,
                 password: str | None = None, aof: bool = False, any_port: bool | None = None):
        self.directory = Path(directory)
        # any_port: ``port`` is only a preference (``up``'s pick_port()), another free one will do
        self._any_port = port is None if any_port is None else any_port
        self.port = port if port is not None else free_port()
        self.password = password
        self.url = self._url()
        self.log_path = self.directory / "redis.log"
        self.extra_args = extra_args
        self.aof = aof
        self.process: subprocess.Popen | None = None

    def _url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _config_args(self) -> list[str]:
        """A config file first when there is a password (its first argument), then the flags."""
        args = []
        if self.password:
            conf = self.directory / "auth.conf"
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f'requirepass "{self.password}"\n')
            args.append(str(conf))
        persistence = (["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof
                       else ["--appendonly", "no"])
        return [*args, "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                "--dir", str(self.directory), "--save", "", *persistence,
                "--logfile", str(self.log_path), *self.extra_args]

    def start(self, timeout_s: float = 10.0) -> "RedisServer":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH (run .ci/run, or apt-get install redis-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, *self._config_args()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if int(client.info("server")["process_id"]) == self.process.pid:
                    # INFO answers while the dataset loads; every other command says LOADING
                    if int(client.info("persistence").get("loading", 0)):
                        raise redis.BusyLoadingError("still loading its dataset")
                    self._any_port = False  # a restart comes back on the same port
                    return self
                # Another server took the port between free_port() and our bind (parallel
                # test sessions): ours exits; a free port of our own is tried again.
                self.stop()
                if not self._any_port or time.monotonic() > deadline:
                    raise RuntimeError(f"port {self.port} is taken by another redis-server")
                self.port = free_port()
                self.url = self._url()
                return self.start(max(0.1, deadline - time.monotonic()))
            # ConnectionError also covers BusyLoadingError (still loading its AOF or RDB); a
            # TimeoutError is a server too slow to answer yet (a loaded machine, appendfsync
            # always): both are retried until the deadline.
            except (redis.ConnectionError, redis.TimeoutError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
                    self.stop()
                    if (self._any_port and "Address already in use" in tail
                            and time.monotonic() < deadline):
                        # A port chosen free was bound by another process before ours started
                        # (parallel `up`s pick the same first free port): another free one.
                        self.port = free_port()
                        self.url = self._url()
                        return self.start(max(0.1, deadline - time.monotonic()))
                    raise RuntimeError(f"redis-server did not start on port {self.port}:\n{tail}")
                time.sleep(0.02)
            finally:
                client.close()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def version(self) -> str:
        """The running server's ``redis_version``."""
        client = redis.Redis.from_url(self.url, socket_timeout=5)
        try:
            return str(client.info("server")["redis_version"])
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _poll(condition, timeout_s: float, failure: str) -> None:
    """Until ``condition()`` (Redis errors count as not yet); RuntimeError(failure) at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.1)


#: The master name of :class:`SentinelGroup`.
SENTINEL_MASTER = "tracebus"


class SentinelGroup:
    """A Sentinel group for tests and bench: a primary, a replica and three sentinels, all
    ``redis-server`` processes (sentinels are ``redis-server FILE --sentinel``) on free ports.

    ``url`` is the ``redis+sentinel://`` URL of the group; :meth:`failover` promotes the
    replica (``SENTINEL FAILOVER``) and waits until every sentinel names the new primary.
    """

    def __init__(self, directory: Path, down_after_ms: int = 1000, failover_timeout_ms: int = 3000,
                 extra_args: tuple[str, ...] = ()):
        self.directory = Path(directory)
        self.primary = RedisServer(self.directory / "primary", extra_args=extra_args)
        self.replica = RedisServer(self.directory / "replica", extra_args=(
            *extra_args, "--replicaof", "127.0.0.1", str(self.primary.port)))
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.sentinels: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SENTINEL_MASTER}/0"

    def start(self, timeout_s: float = 30.0) -> "SentinelGroup":
        self.primary.start()
        self.replica.start()
        self.sentinels = [self._spawn_sentinel(i) for i in range(len(self.sentinel_ports))]
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn_sentinel(self, index: int) -> subprocess.Popen:
        port = self.sentinel_ports[index]
        folder = self.directory / f"sentinel-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "sentinel.conf"  # rewritten by the sentinel: a fresh one per start
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {folder}\nlogfile {folder / 'sentinel.log'}\n"
            f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} {self.down_after_ms}\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n")
        return subprocess.Popen([shutil.which("redis-server"), str(conf), "--sentinel"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def _respawn_dead(self) -> None:
        """A sentinel that exited at start lost its port to another process: another port."""
        for i, process in enumerate(self.sentinels):
            if process.poll() is not None:
                self.sentinel_ports[i] = free_port()
                self.sentinels[i] = self._spawn_sentinel(i)

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, decode_responses=True)

    def _wait_ready(self, timeout_s: float) -> None:
        """Until the replica is in sync and every sentinel sees the replica and two peers."""
        replica = redis.Redis.from_url(self.replica.url, socket_timeout=1, decode_responses=True)

        def ready() -> bool:
            self._respawn_dead()
            return (replica.info("replication").get("master_link_status") == "up"
                    and all(self._sees_group(port) for port in self.sentinel_ports))

        try:
            _poll(ready, timeout_s, f"the Sentinel group in {self.directory} did not become ready")
        finally:
            replica.close()

    def _sees_group(self, port: int) -> bool:
        client = self._sentinel(port)
        try:
            master = client.execute_command("SENTINEL", "MASTER", SENTINEL_MASTER)
            fields = dict(zip(master[::2], master[1::2])) if isinstance(master, list) else master
            return int(fields.get("num-slaves", 0)) >= 1 and int(fields.get("num-other-sentinels", 0)) >= 2
        finally:
            client.close()

    def master_port(self, sentinel_port: int | None = None) -> int:
        """The primary's port as a sentinel names it."""
        client = self._sentinel(sentinel_port or self.sentinel_ports[0])
        try:
            return int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER)[1])
        finally:
            client.close()

    def failover(self, timeout_s: float = 20.0) -> int:
        """Promote the replica; returns the new primary's port once every sentinel names it
        and the new primary accepts writes."""
        old = self.master_port()
        client = self._sentinel(self.sentinel_ports[0])
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    client.execute_command("SENTINEL", "FAILOVER", SENTINEL_MASTER)
                    break
                except redis.ResponseError as e:  # NOGOODSLAVE while the replica is catching up
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"SENTINEL FAILOVER refused: {e}") from None
                    time.sleep(0.2)
        finally:
            client.close()
        while True:
            try:
                ports = {self.master_port(p) for p in self.sentinel_ports}
            except redis.RedisError:  # a sentinel slow to answer (a loaded machine): asked again
                ports = set()
            if len(ports) == 1 and old not in ports:
                new = ports.pop()
                probe = redis.Redis(host="127.0.0.1", port=new, socket_timeout=1, decode_responses=True)
                try:
                    if probe.info("replication").get("role") == "master":
                        return new
                except redis.RedisError:
                    pass
                finally:
                    probe.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the failover from port {old} did not complete in {timeout_s} s")
            time.sleep(0.05)

    def wait_replica(self, timeout_s: float = 30.0) -> None:
        """Until the current primary has a replica online (the old primary, after a failover)."""
        port = self.master_port()
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, decode_responses=True)

        def online() -> bool:
            return any(isinstance(v, dict) and v.get("state") == "online"
                       for k, v in client.info("replication").items() if k.startswith("slave"))

        try:
            _poll(online, timeout_s, f"no replica of the primary on port {port} came online")
        finally:
            client.close()

    def __enter__(self) -> "SentinelGroup":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for process in self.sentinels:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.sentinels:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.replica.stop()
        self.primary.stop()
