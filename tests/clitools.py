"""Running the ``tracebus`` CLI in tests: in this process (fast), as a subprocess, or as a
process forked from a server that has already imported the CLI (:class:`ForkedCli`).

All take the environment the command should see (``REDIS_URL``, ``TRACEBUS_KEY_PREFIX``,
...) explicitly; nothing of the test process's own ``TRACE*``/``REDIS_URL`` leaks in. The
in-process runner restores what ``tracebus.cli.main`` changes process-wide (root logging
handlers, the actors' broker).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from tracebus import cli

actor_module = importlib.import_module("tracebus.engine.actor")  # `tracebus.actor` is the decorator

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    out: str
    err: str


def clean_env(**env: str) -> dict[str, str]:
    """This process's environment without tracebus settings, plus ``env``."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
    return {**base, **{k: str(v) for k, v in env.items()}}


def run_cli(*argv: str, env: dict[str, str]) -> Result:
    """``tracebus ARGV`` in this process; argparse exits become their exit code."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    broker = actor_module._broker
    try:
        with mock.patch.dict(os.environ, clean_env(**env), clear=True), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(argv))
            except SystemExit as e:  # argparse: --help (0) and usage errors (2)
                code = e.code if isinstance(e.code, int) else 1
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        actor_module.set_broker(broker)
    return Result(code, out.getvalue(), err.getvalue())


def run_cli_process(*argv: str, env: dict[str, str], timeout_s: float = 60, **kwargs) -> Result:
    """``python -m tracebus ARGV`` as a subprocess (for tty-less progress output, stdout bytes)."""
    proc = subprocess.run([sys.executable, "-m", "tracebus", *argv], cwd=ROOT, env=clean_env(**env),
                          capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                          **kwargs)
    return Result(proc.returncode, proc.stdout, proc.stderr)


#: The fork server's program (``python -c``): it imports what ``python -m tracebus`` imports before
#: ``main()`` runs, then for each request (a JSON line on stdin) forks a child that runs
#: ``tracebus/__main__.py`` as ``-m`` does; it answers the child's pid, then its wait status.
_FORK_SERVER = r"""
import json, os, runpy, sys, traceback
import tracebus.cli  # noqa: F401  (python -m tracebus: the package, then __main__ imports the CLI)

def setup(req):
    os.chdir(req["cwd"])
    sys.path[0] = os.getcwd()  # as -m sets it: the working directory
    os.environ.clear()
    os.environ.update(req["env"])
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    for target, path in ((1, req["out"]), (2, req["err"])):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, target)
        os.close(fd)
    sys.argv = ["-m", *req["argv"]]

def run():
    # as the interpreter ends a program: SystemExit's code or a traceback, exit hooks, flushes
    try:
        runpy.run_module("tracebus", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    import atexit
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except Exception:
        print("Exception ignored while flushing sys.stdout:", file=sys.stderr)
        traceback.print_exc()
        code = code or 120
    sys.stderr.flush()
    return code & 0xFF

for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            setup(req)
            code = run()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": status}), flush=True)
"""


class ForkedCli:
    """``python -m tracebus ARGV`` as real processes without an interpreter start each.

    One server process imports the CLI (about 0.3 s of CPU, once); each :meth:`run` forks it
    into a child that is a process of its own, as a fresh ``python -m tracebus`` is: its own
    working directory, environment (exactly ``clean_env(**env)``, as :func:`run_cli_process`
    gives), stdin ``/dev/null``, stdout and stderr files, and exit status; it runs
    ``tracebus/__main__.py`` as ``-m`` does and ends as the interpreter ends a program. What the
    fork skips is the interpreter's start and the imports, which read no configuration (settings
    are read from the environment at run time, :mod:`tracebus.config`). One command at a time.
    """

    def __init__(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="tracebus-forked-cli-")
        with open(os.path.join(self.folder.name, "server.err"), "wb") as err:
            self.server = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], cwd=ROOT, env=clean_env(),
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self._buffer = b""
        self.count = 0
        self.active: ForkedProcess | None = None

    def start(self, *argv: str, cwd=ROOT, env: dict[str, str], out: str | None = None,
              err: str | None = None) -> "ForkedProcess":
        """Start ``python -m tracebus ARGV`` (stdout and stderr into the files ``out`` and ``err``,
        or files of its own); until it has been waited for, no other command runs."""
        self._kill_left()
        self.count += 1
        out = str(out or os.path.join(self.folder.name, f"{self.count}.out"))
        err = str(err or os.path.join(self.folder.name, f"{self.count}.err"))
        request = {"argv": list(argv), "cwd": str(cwd), "env": clean_env(**env), "out": out, "err": err}
        self.server.stdin.write(json.dumps(request).encode() + b"\n")
        self.server.stdin.flush()
        self.active = ForkedProcess(self, ["tracebus", *argv], self._answer(10)["pid"], out, err)
        return self.active

    def run(self, *argv: str, cwd=ROOT, env: dict[str, str], timeout_s: float = 60,
            text: bool = True) -> subprocess.CompletedProcess:
        """Like ``subprocess.run([python, "-m", "tracebus", *argv], cwd=cwd, env=clean_env(**env),
        capture_output=True, text=text, stdin=subprocess.DEVNULL, timeout=timeout_s)``."""
        proc = self.start(*argv, cwd=cwd, env=env)
        stdout, stderr = proc.communicate(timeout_s, text=text)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    def cli(self, *argv: str, env: dict[str, str], timeout_s: float = 60) -> Result:
        """As :func:`run_cli_process`: ``python -m tracebus ARGV`` in the project folder."""
        proc = self.run(*argv, env=env, timeout_s=timeout_s)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def _answer(self, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        fd = self.server.stdout.fileno()
        while b"\n" not in self._buffer:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise subprocess.TimeoutExpired(["tracebus (forked)"], timeout_s)
            chunk = os.read(fd, 65536)
            if not chunk:
                with open(os.path.join(self.folder.name, "server.err"), errors="replace") as f:
                    raise RuntimeError(f"the CLI fork server ended:\n{f.read()[-3000:]}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _kill_left(self) -> None:
        """Kill (and reap) a command a failed test left running."""
        if self.active is not None and self.active.returncode is None:
            self.active.send_signal(9)
            self.active.wait(10)

    def close(self) -> None:
        self._kill_left()
        self.server.stdin.close()
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.server.stdout.close()
        self.folder.cleanup()


class ForkedProcess:
    """A command started by :meth:`ForkedCli.start`, waited for as a ``subprocess.Popen`` is."""

    def __init__(self, cli: ForkedCli, args: list[str], pid: int, out: str, err: str):
        self.cli, self.args, self.pid, self.out, self.err = cli, args, pid, out, err
        self.returncode: int | None = None

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self._status(0)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self._status(60 if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, 9)
                self._status(10)
                raise
        return self.returncode

    def communicate(self, timeout: float | None = None, text: bool = True):
        """Wait for it, then (stdout, stderr) as written to its files."""
        self.wait(timeout)
        with open(self.out, "rb") as o, open(self.err, "rb") as e:
            stdout, stderr = o.read(), e.read()
        if text:
            stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
        return stdout, stderr

    def _status(self, timeout_s: float) -> None:
        status = self.cli._answer(timeout_s)["status"]
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
