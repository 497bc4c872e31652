"""Running the ``tracebus`` CLI in tests: in this process (fast) or as a subprocess.

Both take the environment the command should see (``REDIS_URL``, ``TRACEBUS_KEY_PREFIX``,
...) explicitly; nothing of the test process's own ``TRACE*``/``REDIS_URL`` leaks in. The
in-process runner restores what ``tracebus.cli.main`` changes process-wide (root logging
handlers, the actors' broker).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import subprocess
import sys
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
