"""Shared memory between the supervisor and one forked worker: the heartbeat slot.

An anonymous ``mmap`` created before ``fork()`` is shared by parent and child, so the
child publishes, without any syscall beyond a memory write: its last heartbeat and its
current hard deadline (both ``time.monotonic()``, which is system-wide on Linux), and
the number of messages done. The supervisor reads them each tick. This plays the role
of gunicorn's unlinked-tempfile mtime heartbeat, without touching a filesystem.

Each field is an aligned 8-byte word written on its own with one slice assignment.
(``struct.pack_into`` over the whole record is not safe here: CPython zeroes the target
before packing, so a concurrent reader could see a heartbeat of 0.0 and kill a healthy
worker.)
"""

from __future__ import annotations

import mmap
import struct
import time

_DOUBLE = struct.Struct("d")
_INT = struct.Struct("q")
_HEARTBEAT, _DEADLINE, _DONE = 0, 8, 16


class WorkerSlot:
    """One worker's heartbeat, deadline (0: none) and message count."""

    def __init__(self):
        self._mm = mmap.mmap(-1, 24)
        self.notify()

    def notify(self) -> None:
        """Record that the worker's loop is alive now."""
        self._mm[_HEARTBEAT:_HEARTBEAT + 8] = _DOUBLE.pack(time.monotonic())

    def set_deadline(self, deadline: float) -> None:
        self._mm[_DEADLINE:_DEADLINE + 8] = _DOUBLE.pack(deadline)

    def set_done(self, done: int) -> None:
        self._mm[_DONE:_DONE + 8] = _INT.pack(done)

    @property
    def last_heartbeat(self) -> float:
        return _DOUBLE.unpack_from(self._mm, _HEARTBEAT)[0]

    @property
    def deadline(self) -> float:
        return _DOUBLE.unpack_from(self._mm, _DEADLINE)[0]

    @property
    def done(self) -> int:
        return _INT.unpack_from(self._mm, _DONE)[0]

    def close(self) -> None:
        self._mm.close()
