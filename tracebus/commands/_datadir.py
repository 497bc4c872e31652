"""``tracebus up``'s hold on its data dir: one ``up`` per folder, and its private Redis's secret.

Not a command. :class:`DataDirLock` takes an exclusive ``flock`` on ``<data-dir>/up.lock``
for the whole run and writes the holder's pid and API port into it, so a second ``up``
on the same folder is refused with one line naming the first (the kernel drops the lock
when the holder dies, even by SIGKILL: a stale file never blocks). A stopped ``up`` deletes
the file, still holding it; an ``up`` that locked the file just deleted sees that its inode is
no longer the one at the path and takes the new one, so two never hold the lock at once.

:func:`redis_password` is the private Redis's password, made once and kept in a 0600 file.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path

from tracebus.errors import ConfigError

LOCK_FILE = "up.lock"


class DataDirLock:
    """The exclusive lock of one ``up`` run on ``data_dir`` (released by :meth:`release`)."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, port: int) -> None:
        """Take the lock and record ``pid port``.

        Raises:
            ConfigError: another ``up`` holds it (the message names its pid and port).
        """
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").split()
                os.close(fd)
                pid, other_port = (holder + ["?", "?"])[:2]
                raise ConfigError(f"{self.path.parent} is in use by another tracebus up (pid {pid}, "
                                  f"API port {other_port}); stop it first or pass another --data-dir") from None
            # The holder deletes the file as it releases it: a lock taken on a deleted file is
            # no lock, so take the one at the path.
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {port}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Delete the file (a stopped ``up`` leaves no lock behind) and drop the lock."""
        if self._fd is not None:
            try:
                self.path.unlink()  # while still held: whoever opened it before retries (acquire)
            except FileNotFoundError:
                pass
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600 from its creation on)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def redis_password(redis_dir: Path) -> str:
    """The private Redis's password, from ``<redis_dir>/password`` (made on first use, 0600)."""
    path = redis_dir / "password"
    try:
        password = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        password = ""
    if not password:
        redis_dir.mkdir(parents=True, exist_ok=True)
        password = secrets.token_urlsafe(24)
        write_private(path, password + "\n")
    elif path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return password
