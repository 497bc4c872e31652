"""A private redis-server process: used by the test suite, bench/ and ``tracebus up``.

Binds port 0 to find a free port (or takes the one given: ``tracebus up`` uses
:func:`pick_port`, the first free one from 6380), starts ``redis-server`` with its files in
a directory and its log in a file (never an undrained pipe), waits for PING on a
monotonic deadline, and stops it with SIGTERM -> wait -> SIGKILL. :func:`reachable` tells
whether a Redis answers at a URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


#: First port ``tracebus up`` tries for its own server (6379 is left to a system Redis).
FIRST_UP_PORT = 6380


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    """True when ``host:port`` can be bound (nothing listens there)."""
    with socket.socket() as s:
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


def reachable(url: str, timeout_s: float = 1.0) -> bool:
    """True when a Redis at ``url`` answers PING within ``timeout_s``."""
    client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError, ValueError):
        return False
    finally:
        client.close()


class RedisServer:
    """One redis-server process on a free port with its data in ``directory``."""

    def __init__(self, directory: Path, extra_args: tuple[str, ...] = (), port: int | None = None):
        self.directory = Path(directory)
        self.port = port if port is not None else free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_path = self.directory / "redis.log"
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 10.0) -> "RedisServer":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH (run .ci/run, or apt-get install redis-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", "--appendonly", "no", "--logfile", str(self.log_path), *self.extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
                    self.stop()
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
