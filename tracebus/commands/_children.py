"""Child processes run in the foreground by ``tracebus up``: start, watch, stop.

Each child runs in its own session (its own process group), so a Ctrl-C in the terminal
reaches only the parent, which then stops the children in the order it chooses. Stopping
sends SIGTERM, waits up to each child's deadline, then SIGKILLs the child's whole process
group, so a master's workers (gunicorn's, the supervisor's) cannot be left behind, and
reaps what it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass
class ForegroundProcess:
    """One child process and how long it may take to stop.

    Attributes:
        name(str): what the user calls it ("worker supervisor").
        process(subprocess.Popen): the process (leader of its own process group).
        stop_timeout_s(float): time between SIGTERM and SIGKILL.
    """

    name: str
    process: subprocess.Popen
    stop_timeout_s: float

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> bool:
        return self.process.poll() is not None

    def group_alive(self) -> bool:
        """True while any process of the child's group exists (the child or its children)."""
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is None:
            return "is running"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"


class Children:
    """The children of one ``tracebus up`` run."""

    def __init__(self) -> None:
        self.children: list[ForegroundProcess] = []

    def start(self, name: str, argv: Sequence[str], env: dict[str, str],
              stop_timeout_s: float) -> ForegroundProcess:
        """Start ``argv`` in a new session; its output goes where ours goes."""
        process = subprocess.Popen(list(argv), env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        return self.adopt(name, process, stop_timeout_s)

    def adopt(self, name: str, process: subprocess.Popen, stop_timeout_s: float) -> ForegroundProcess:
        """Watch and stop a process started elsewhere (in its own session)."""
        child = ForegroundProcess(name, process, stop_timeout_s)
        self.children.append(child)
        return child

    def first_exited(self) -> ForegroundProcess | None:
        """The first child that has exited, if any."""
        return next((c for c in self.children if c.exited()), None)

    def stop(self, which: Sequence[ForegroundProcess], hurry: Callable[[], bool] = lambda: False) -> None:
        """SIGTERM ``which`` together, wait for each up to its deadline, then SIGKILL the
        groups of those still running (or whose children outlived them).

        Args:
            which: the children to stop (already exited ones are only cleaned up).
            hurry: polled while waiting; when it returns True, kill at once.
        """
        started = time.monotonic()
        for child in which:
            if not child.exited():
                _signal_group(child.pid, signal.SIGTERM, leader_only=True)
        for child in which:
            while not child.exited() and time.monotonic() - started < child.stop_timeout_s:
                if hurry():
                    break
                time.sleep(0.05)
        for child in which:
            if not child.exited() or child.group_alive():
                _signal_group(child.pid, signal.SIGKILL)
            child.process.wait()
            deadline = time.monotonic() + 5
            while child.group_alive() and time.monotonic() < deadline:
                time.sleep(0.02)  # orphans are reaped by init; give it a moment

    def stop_all(self, hurry: Callable[[], bool] = lambda: False) -> None:
        """Stop every child, in the order they were started in reverse."""
        for child in reversed(self.children):
            self.stop([child], hurry)


def _signal_group(pid: int, signum: int, leader_only: bool = False) -> None:
    try:
        if leader_only:
            os.kill(pid, signum)
        else:
            os.killpg(pid, signum)
    except ProcessLookupError:
        pass
