"""Shared memory between the supervisor and one forked worker: the heartbeat slot.

An anonymous ``mmap`` created before ``fork()`` is shared by parent and child, so the
child publishes, without any syscall beyond a memory write: its last heartbeat and its
current hard deadline (both ``time.monotonic()``, which is system-wide on Linux), and
the number of messages done. The supervisor reads them each tick. This plays the role
of gunicorn's unlinked-tempfile mtime heartbeat, without touching a filesystem.
"""

from __future__ import annotations

import mmap
import struct
import time

_LAYOUT = struct.Struct("ddq")  # heartbeat, hard deadline (0 = none), messages done


class WorkerSlot:
    """One worker's heartbeat, deadline and message count."""

    def __init__(self):
        self._mm = mmap.mmap(-1, _LAYOUT.size)
        self.notify()

    def _read(self) -> tuple[float, float, int]:
        return _LAYOUT.unpack_from(self._mm, 0)

    def _write(self, heartbeat: float, deadline: float, done: int) -> None:
        _LAYOUT.pack_into(self._mm, 0, heartbeat, deadline, done)

    def notify(self) -> None:
        """Record that the worker's loop is alive now."""
        _, deadline, done = self._read()
        self._write(time.monotonic(), deadline, done)

    def set_deadline(self, deadline: float) -> None:
        heartbeat, _, done = self._read()
        self._write(heartbeat, deadline, done)

    def set_done(self, done: int) -> None:
        heartbeat, deadline, _ = self._read()
        self._write(heartbeat, deadline, done)

    @property
    def last_heartbeat(self) -> float:
        return self._read()[0]

    @property
    def deadline(self) -> float:
        return self._read()[1]

    @property
    def done(self) -> int:
        return self._read()[2]

    def close(self) -> None:
        self._mm.close()
