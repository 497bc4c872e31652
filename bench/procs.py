"""Processes for benchmarks: start/stop in their own session, tracebus supervisors, RSS sampling.

A :class:`Proc` runs in its own session with its output in a log file (never an
undrained pipe) and stops with SIGTERM to its group -> wait -> SIGKILL.
:class:`RssSampler` polls the resident set size of labelled groups of processes
(for instance "supervisor" and "workers" = the supervisor's children) from a thread
and keeps each label's peak and a time series for plots.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import psutil

REPO = Path(__file__).resolve().parent.parent


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.01,
               what: str = "condition") -> float:
    """Poll ``predicate`` until true; return the seconds waited. Raises TimeoutError."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{what} not reached within {timeout_s}s")
        time.sleep(interval_s)
    return time.monotonic() - t0


class Proc:
    """A started subprocess with its log file."""

    def __init__(self, name: str, popen: subprocess.Popen, log_path: Path):
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @classmethod
    def start(cls, name: str, argv: Sequence[str], log_path: Path, env: dict | None = None,
              cwd: Path | None = None) -> "Proc":
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, cwd=cwd or REPO,
                                     start_new_session=True)
        return cls(name, popen, log_path)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def children(self) -> list[psutil.Process]:
        """Live direct children (e.g. a supervisor's workers)."""
        try:
            return psutil.Process(self.pid).children()
        except psutil.NoSuchProcess:
            return []

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the process group, wait, then SIGKILL the group. Returns the exit code."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:  # leftovers of the group (workers of a dead supervisor, prefork children)
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.popen.poll() is None:
            self.popen.wait()
        return self.popen.returncode


def start_supervisor(name: str, redis_url: str, modules: Sequence[str], processes: int,
                     queues: str | None, log_path: Path, env: dict | None = None) -> Proc:
    """``python -m tracebus worker MODULES --processes N [--queues Q]`` against ``redis_url``."""
    argv = [sys.executable, "-m", "tracebus", "worker", *modules, "--processes", str(processes)]
    if queues:
        argv += ["--queues", queues]
    return Proc.start(name, argv, log_path, env={"REDIS_URL": redis_url, **(env or {})}, cwd=REPO)


def _rss(processes: Iterable[psutil.Process]) -> dict[int, int]:
    out = {}
    for p in processes:
        try:
            out[p.pid] = p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return out


class RssSampler:
    """Sample the RSS of labelled process groups every ``interval_s`` from a thread.

    Usage::

        sampler = RssSampler(interval_s=0.1)
        sampler.add("supervisor", lambda: [psutil.Process(sup.pid)])
        sampler.add("workers", sup.children)      # re-evaluated each sample: respawns count
        with sampler:
            ...                                  # the measured run
        sampler.peaks_mb()  # {"supervisor": 31.2, "workers": 45.0}  (largest single process)
    """

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self.groups: dict[str, Callable[[], Iterable[psutil.Process]]] = {}
        self.peak_bytes: dict[str, int] = {}
        self.series: list[tuple[float, dict[str, int]]] = []  # (t, label -> largest process RSS)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def add(self, label: str, processes: Callable[[], Iterable[psutil.Process]]) -> None:
        self.groups[label] = processes
        self.peak_bytes.setdefault(label, 0)

    def sample(self) -> None:
        point = {}
        for label, fn in self.groups.items():
            try:
                rss = _rss(fn())
            except psutil.Error:
                rss = {}
            largest = max(rss.values(), default=0)
            point[label] = largest
            self.peak_bytes[label] = max(self.peak_bytes[label], largest)
        self.series.append((time.monotonic() - self._t0, point))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "RssSampler":
        self._t0 = time.monotonic()
        self._stop.clear()
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def peaks_mb(self) -> dict[str, float]:
        return {label: round(b / 2**20, 1) for label, b in self.peak_bytes.items()}


def tree_cpu_s(pids: Iterable[int]) -> float:
    """CPU seconds (user + system) used so far by ``pids``, their descendants, and the
    descendants they already reaped (an RQ work horse per job, for instance)."""
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for p in tree:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass
    return total
