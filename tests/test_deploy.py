"""deploy/: the systemd units, the environment file and the README.

The units are parsed as INI files and checked key by key (always), and verified with
``systemd-analyze verify`` when the tool is installed: on a copy whose install prefix
``/opt/tracebus`` points at this checkout and its virtualenv, because verify insists that
``ExecStart`` binaries exist. Verify's warnings about our files fail the test too (it exits
0 on an unknown key or a bad value, and only says so).
"""

from __future__ import annotations

import configparser
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from api.settings import ApiSettings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
ROOT = DEPLOY.parent
UNITS = ("tracebus-worker.service", "tracebus-api.service")
PREFIX = "/opt/tracebus"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False, empty_lines_in_values=False)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string((DEPLOY / name).read_text())
    return parser


def env_file() -> dict[str, str]:
    """Assignments of deploy/tracebus.env (comments skipped, quotes removed)."""
    values = {}
    for line in (DEPLOY / "tracebus.env").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            if value.startswith('"') and value.endswith('"'):
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            assert name not in values, f"{name} assigned twice"
            values[name] = value
    return values


def render_env():
    spec = importlib.util.spec_from_file_location("render_env", DEPLOY / "render_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def megabytes(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", value)
    assert match, f"not a byte size: {value!r}"
    return float(match[1]) * {"K": 1 / 1024, "": 1 / 1024 ** 2, "M": 1, "G": 1024, "T": 1024 ** 2}[match[2]]


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match, f"not a plain duration: {value!r}"
    return int(match[1]) * (60 if match[2] == "min" else 1)


# -- the worker unit ------------------------------------------------------------------------------
def test_worker_unit_is_a_notify_service_that_drains_and_restarts():
    service = unit("tracebus-worker.service")["Service"]
    assert service["Type"] == "notify"  # the supervisor sends READY=1
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # SIGTERM to the supervisor only; it drains its workers
    assert service["Restart"] == "on-failure"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"  # HUP rolls the workers
    assert service["EnvironmentFile"] == "/etc/tracebus/tracebus.env"
    assert service["OOMPolicy"] == "continue"  # an OOM-killed worker is requeued, not the unit stopped
    exec_start = service["ExecStart"].split()
    assert exec_start[0] == f"{PREFIX}/.venv/bin/tracebus"
    assert exec_start[1:3] == ["worker", "tracebus.trace.tasks"]
    assert "--queues" in exec_start and "${TRACE_WORKER_QUEUE}" in exec_start


def test_worker_stop_timeout_outlasts_the_drain_deadline():
    service = unit("tracebus-worker.service")["Service"]
    drain_s = int(env_file()["TRACEBUS_GRACEFUL_TIMEOUT_SECONDS"])
    # the supervisor kills leftovers at the deadline, then requeues their entries: leave it room
    assert seconds(service["TimeoutStopSec"]) >= drain_s + 15


def test_worker_memory_limits_are_sized_from_rss_limit_times_processes():
    service = unit("tracebus-worker.service")["Service"]
    env = env_file()
    per_worker_mb, workers = int(env["TRACEBUS_WORKER_MAX_RSS_MB"]), int(env["TRACE_WORKER_COUNT"])
    assert per_worker_mb > 0, "the memory limits need a per-worker RSS limit to be sized from"
    high, hard = megabytes(service["MemoryHigh"]), megabytes(service["MemoryMax"])
    assert high >= per_worker_mb * workers  # every worker up to its limit fits under MemoryHigh
    assert hard >= high + per_worker_mb  # and one overshooting worker (or a roll) under MemoryMax
    text = (DEPLOY / "tracebus-worker.service").read_text()
    # the arithmetic is written down next to the numbers
    assert f"{workers} x {per_worker_mb}M" in text and service["MemoryHigh"] in text.split("MemoryHigh =")[1]


def test_api_unit_runs_gunicorn_with_the_api_config():
    service = unit("tracebus-api.service")["Service"]
    assert service["ExecStart"] == f"{PREFIX}/.venv/bin/gunicorn 'api.app:get_app()' -c api/gunicorn.conf.py"
    assert service["WorkingDirectory"] == PREFIX  # the -c path and the app module are relative to it
    assert service["Type"] == "notify" and service["Restart"] == "on-failure"
    assert service["EnvironmentFile"] == "/etc/tracebus/tracebus.env"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    graceful_s = int(env_file()["TRACEBUS_API_GRACEFUL_TIMEOUT_SECONDS"])
    assert seconds(service["TimeoutStopSec"]) > graceful_s
    assert megabytes(service["MemoryMax"]) > megabytes(service["MemoryHigh"])


def test_the_files_the_units_run_exist_in_the_repository():
    assert (ROOT / "api" / "gunicorn.conf.py").is_file()
    assert "def get_app(" in (ROOT / "api" / "app.py").read_text()
    assert (ROOT / "tracebus" / "trace" / "tasks.py").is_file()


@pytest.mark.parametrize("name", UNITS)
def test_units_have_the_sections_and_keys_systemd_needs(name):
    parsed = unit(name)
    assert parsed.sections() == ["Unit", "Service", "Install"]
    assert parsed["Unit"]["Description"] and parsed["Install"]["WantedBy"] == "multi-user.target"
    assert parsed["Service"]["User"] == "tracebus" and parsed["Service"]["WorkingDirectory"] == PREFIX


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_units_pass_systemd_analyze_verify(tmp_path):
    # verify checks that ExecStart binaries exist: point the install prefix at this checkout
    venv = Path(sys.prefix)
    assert (venv / "bin" / "tracebus").exists() and (venv / "bin" / "gunicorn").exists()
    for name in UNITS:
        text = (DEPLOY / name).read_text().replace(f"{PREFIX}/.venv", str(venv)).replace(PREFIX, str(ROOT))
        (tmp_path / name).write_text(text)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", *(str(tmp_path / n) for n in UNITS)],
                          capture_output=True, text=True, timeout=60)
    about_ours = [line for line in (proc.stdout + proc.stderr).splitlines()
                  if any(n in line for n in UNITS)]
    assert proc.returncode == 0 and not about_ours, proc.stdout + proc.stderr


# -- the environment file -----------------------------------------------------------------------------
def test_env_file_is_generated_from_the_settings():
    # Regenerate with: .venv/bin/python deploy/render_env.py > deploy/tracebus.env
    assert (DEPLOY / "tracebus.env").read_text() == render_env().render()


def test_env_file_lists_every_setting_with_its_default():
    values, text = env_file(), (DEPLOY / "tracebus.env").read_text()
    deploy_values = render_env().DEPLOY_VALUES
    for variable, default, _ in ApiSettings.documented():
        if variable == "NOTIFY_SOCKET":
            # systemd passes it; an assignment here would replace it
            assert variable not in values and f"# {variable}=" in text
            continue
        assert variable in values, f"{variable} missing from deploy/tracebus.env"
        if variable in deploy_values:
            assert values[variable] == deploy_values[variable][0]
            assert f"Deploy value (default {default})" in text
        else:
            assert values[variable] == str(default), variable
    assert set(values) <= {v for v, _, _ in ApiSettings.documented()}, "unknown variables in the env file"
    # and the file parses into valid settings
    ApiSettings.from_env(values)


# -- the README ---------------------------------------------------------------------------------------
def test_readme_covers_install_operations_and_redis_settings():
    text = (DEPLOY / "README.md").read_text()
    for heading in ("## Install", "## Start", "## Upgrade", "## Roll the workers", "## Scale", "## Logs"):
        assert heading in text
    for fact in ("maxmemory-policy noeviction", "appendonly yes", "appendfsync everysec", "SIGTTIN",
                 "SIGTTOU", "TRACE_WORKER_COUNT", "systemctl reload tracebus-worker", "journalctl -u",
                 "TRACEBUS_LOG_FORMAT=json"):
        assert fact in text, fact
