"""A private PostgreSQL server process: used by the test suite, bench/ and ``tracebus up --source postgres``.

:class:`PostgresServer` runs ``initdb`` into ``<directory>/data`` (once: a directory that
already holds a cluster is started as it is), then ``postgres`` listening on 127.0.0.1 only, on
a free port, its socket in ``<directory>``, its log in ``<directory>/postgres.log``; the
superuser ``tracebus`` has a password (``<directory>/password``, 0600, never on a command line)
and the database ``tracebus`` is created. PostgreSQL refuses to run as root: when the caller is
root, the files belong to the OS user ``postgres`` and both programs run as that user.

The binaries are found on PATH, else in Debian's ``/usr/lib/postgresql/<version>/bin`` (the
``postgresql`` package installs them there and not on PATH). The server stops with SIGINT (a
fast shutdown) -> wait -> SIGKILL.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from tracebus.redis_proc import free_port

#: The superuser and database of a server started here.
USER = DATABASE = "tracebus"
#: The OS user the server runs as when the caller is root.
OS_USER = "postgres"


def bin_dir() -> Path | None:
    """The folder of ``initdb`` and ``postgres``: on PATH, else Debian's newest version's."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                      key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def dsn_of(port: int, password: str, host: str = "127.0.0.1", database: str = DATABASE) -> str:
    return f"postgresql://{USER}:{quote(password, safe='')}@{host}:{port}/{database}"


class PostgresServer:
    """One PostgreSQL server on a free port (or ``port``) with its files in ``directory``.

    Args:
        directory: its folder (created); None: a new temporary folder, removed by :meth:`stop`.
        durable: fsync and full-page writes on (``tracebus up``); off for the tests' servers.
        port: the port to listen on; None: a free one.
    """

    def __init__(self, directory: Path | None = None, durable: bool = False, port: int | None = None,
                 template: Path | None = None, any_port: bool | None = None):
        self._temporary = directory is None
        self.template = template  # a stopped server's folder to start a copy of (the tests' cached sample)
        self.directory = Path(directory) if directory is not None else None
        self.durable = durable
        # any_port: ``port`` is only a preference (``up``'s pick_port()), another free one will do
        self._any_port = port is None if any_port is None else any_port
        self.port = port if port is not None else free_port()
        self.process: subprocess.Popen | None = None
        self.password = ""

    # -- files -------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "postgres.log"

    @property
    def url(self) -> str:
        """The libpq URL of the database ``tracebus`` (it carries the password)."""
        return dsn_of(self.port, self.password)

    def _owner(self) -> dict:
        """Popen's ``user``/``group`` when the caller is root (the server refuses root), else {}."""
        if os.geteuid() != 0:
            return {}
        try:
            entry = pwd.getpwnam(OS_USER)
        except KeyError:
            raise RuntimeError(f"PostgreSQL refuses to run as root and there is no OS user {OS_USER!r} "
                               "(apt-get install postgresql creates it)") from None
        return {"user": entry.pw_uid, "group": entry.pw_gid}

    def _chown(self, path: Path) -> None:
        owner = self._owner()
        if owner:
            os.chown(path, owner["user"], owner["group"])

    def _check_reachable(self) -> None:
        """As root: every folder above ``directory`` must let the ``postgres`` user through."""
        owner = self._owner()
        if not owner:
            return
        for parent in self.directory.resolve().parents:
            st = parent.stat()
            if not st.st_mode & 0o001 and st.st_uid != owner["user"]:
                raise RuntimeError(f"PostgreSQL runs as the OS user {OS_USER}, which cannot enter {parent} "
                                   f"(mode {st.st_mode & 0o777:o}): use a folder it can reach")

    def _prepare(self) -> Path:
        binaries = bin_dir()
        if binaries is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb/postgres on PATH or in "
                               "/usr/lib/postgresql/*/bin; ./dev and .ci/run install Debian's postgresql)")
        if self.directory is None:
            # Not under the caller's own temp folders: pytest's are 0700 to root, which the
            # postgres user could not enter.
            self.directory = Path(tempfile.mkdtemp(prefix="tracebus-pg-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.template is not None and not (self.data_dir / "PG_VERSION").exists():
            # cp -a keeps the files' owner (the postgres user) and modes (0700 data, 0600 password).
            subprocess.run(["cp", "-a", f"{self.template}/.", str(self.directory)], check=True)
        self._check_reachable()
        self._chown(self.directory)
        secret = self.directory / "password"
        if secret.exists():
            self.password = secret.read_text().strip()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(binaries, secret)
        return binaries

    def _initdb(self, binaries: Path, secret: Path) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)  # a half-made cluster of a crashed start
        self.password = secrets.token_urlsafe(24)
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        self._chown(secret)
        with open(self.directory / "initdb.log", "wb") as log:
            done = subprocess.run(
                [str(binaries / "initdb"), "-D", str(self.data_dir), "-U", USER, f"--pwfile={secret}",
                 "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", *([] if self.durable else ["--no-sync"])],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, **self._owner())
        if done.returncode != 0:
            said = [line for line in (self.directory / "initdb.log").read_text(errors="replace").splitlines()
                    if line.strip()]
            raise RuntimeError(f"initdb failed in {self.data_dir}: {said[-1] if said else 'no output'} "
                               f"(all of it in {self.directory / 'initdb.log'})")

    # -- process ------------------------------------------------------------------------------

    def _settings(self) -> list[str]:
        speed = [] if self.durable else ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        return [f"-c{s}" for s in ("listen_addresses=127.0.0.1", f"port={self.port}",
                                   f"unix_socket_directories={self.directory}", "max_connections=200",
                                   "shared_buffers=64MB", *speed)]

    def start(self, timeout_s: float = 60.0) -> "PostgresServer":
        binaries = self._prepare()
        deadline = time.monotonic() + timeout_s
        while True:
            with open(self.log_path, "ab") as log:
                self._chown(self.log_path)
                self.process = subprocess.Popen(
                    [str(binaries / "postgres"), "-D", str(self.data_dir), *self._settings()],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, **self._owner())
            if self._wait_ready(deadline):
                self._create_database()
                self._any_port = False  # a restart comes back on the same port
                return self
            # It exited: the port was taken between free_port() and its bind (parallel test
            # sessions), or something else is wrong (the log says).
            log_tail = self.log_path.read_text(errors="replace")[-2000:]
            if self._any_port and "could not" in log_tail and time.monotonic() < deadline:
                self.port = free_port()
                continue
            said = [line for line in log_tail.splitlines() if line.strip()]
            raise RuntimeError(f"postgres did not start on port {self.port}: {said[-1] if said else 'no output'} "
                               f"(its log: {self.log_path})")

    def _wait_ready(self, deadline: float) -> bool:
        """True once the server takes connections; False when it exited. RuntimeError at the deadline."""
        import psycopg

        while True:
            if self.process.poll() is not None:
                return False
            try:
                psycopg.connect(dsn_of(self.port, self.password, database="postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres did not answer on port {self.port} in time "
                                       f"(log: {self.log_path})") from None
                time.sleep(0.05)

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(dsn_of(self.port, self.password, database="postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                conn.execute(f"CREATE DATABASE {DATABASE}")

    def database(self, name: str, template: str | None = None, fresh: bool = False) -> str:
        """The URL of database ``name`` on this server, created when missing (a copy of
        ``template`` when given); ``fresh``: dropped and created again first."""
        import psycopg

        with psycopg.connect(dsn_of(self.port, self.password, database="postgres"), autocommit=True) as conn:
            if fresh:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return dsn_of(self.port, self.password, database=name)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server (a fast shutdown); a temporary folder is removed with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self._temporary and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
