"""What every scenario shares: the run context, environment capture and statistics.

* :class:`Context` -- handed to ``run(args, ctx)``: ``step()`` prints a progress line,
  ``tmp`` is a private temp dir, ``redis()`` starts a private redis-server, ``spawn()`` and
  ``supervisor()`` start processes; everything started is stopped by ``close()``.
* :func:`environment` -- CPU, memory, Python, Redis and package versions, git commit.
* :func:`summarize` / :func:`fmt_stat` -- median with min-max over repeats.

Process helpers (:class:`~bench.procs.Proc`, :class:`~bench.procs.RssSampler`) live in
:mod:`bench.procs` and are re-exported here.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Sequence

from tracebus.redis_proc import RedisServer

from .procs import Proc, RssSampler, start_supervisor, wait_until  # noqa: F401 (re-exported)

#: Packages whose versions every report records.
PACKAGES = ("tracebus", "redis", "hiredis", "msgpack", "psutil", "rq", "dramatiq", "celery", "kombu")
REPO = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def redis_binary_version() -> str:
    binary = shutil.which("redis-server")
    if not binary:
        return "not installed"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip()


def environment() -> dict:
    """The machine and software a run measured (recorded in every report)."""
    import psutil

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "redis_server": redis_binary_version(),
        "packages": versions,
        "git_commit": _git_commit(),
        # Other sessions may share the machine: the report shows how busy it was.
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
    }


def summarize(values: Sequence[float]) -> dict:
    """Median, min and max of repeated measurements (and the values themselves)."""
    values = [float(v) for v in values]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0, "values": []}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values), "values": values}


def fmt_num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def fmt_stat(stat: dict | None, digits: int = 0) -> str:
    """``"12,345 (11,900-12,800)"``: median with the min-max range."""
    if not stat or stat.get("median") is None:
        return "n/a"
    text = fmt_num(stat["median"], digits)
    if stat["n"] > 1:
        text += f" ({fmt_num(stat['min'], digits)}-{fmt_num(stat['max'], digits)})"
    return text


class Context:
    """The per-run state handed to a scenario's ``run(args, ctx)``.

    Attributes:
        name(str): the scenario's NAME.
        args: its parsed arguments (``scale``, ``repeat``, ``out`` and its own).
        tmp(Path): a temp dir removed at the end (logs, Redis data).
        env(dict): :func:`environment`, plus ``redis_server`` once a Redis ran.
        date(str): the run's date, ``YYYY-MM-DD`` (names the report files).
    """

    def __init__(self, name: str, args):
        self.name = name
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        self.env = environment()
        self.date = datetime.date.today().isoformat()
        self.started_at = datetime.datetime.now().isoformat(timespec="seconds")
        self._t0 = time.monotonic()
        self._stack = ExitStack()
        self.keep_tmp = bool(os.environ.get("BENCH_KEEP_TMP"))

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def step(self, message: str) -> None:
        """Print one progress line (flushed, so it shows while the run goes on)."""
        print(f"[{self.elapsed():7.1f}s] {self.name}: {message}", flush=True)

    def redis(self, *extra_args: str) -> RedisServer:
        """Start a private redis-server on a free port; stopped by :meth:`close`."""
        server = RedisServer(self.tmp / f"redis-{len(list(self.tmp.glob('redis-*')))}", tuple(extra_args))
        server.start()
        self._stack.callback(server.stop)
        self.env["redis_server"] = server.version()
        self.step(f"redis-server {self.env['redis_server']} on {server.url}")
        return server

    def spawn(self, name: str, argv: Sequence[str], env: dict | None = None, cwd: Path | None = None) -> Proc:
        """Start a process (own session, output to ``tmp/<name>.log``); stopped by :meth:`close`."""
        proc = Proc.start(name, argv, self.tmp / f"{name}.log", env=env, cwd=cwd or REPO)
        self._stack.callback(proc.stop)
        return proc

    def supervisor(self, redis_url: str, modules: Sequence[str], processes: int = 2,
                   queues: str | None = None, env: dict | None = None, name: str = "tracebus") -> Proc:
        """Start ``python -m tracebus worker`` on ``redis_url``; stopped by :meth:`close`."""
        proc = start_supervisor(name, redis_url, modules, processes, queues, self.tmp / f"{name}.log", env)
        self._stack.callback(proc.stop)
        return proc

    def callback(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` at :meth:`close` (last registered, first run)."""
        self._stack.callback(fn, *args)

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            if not self.keep_tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)
