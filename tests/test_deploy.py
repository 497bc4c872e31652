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
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from api.settings import ApiSettings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
ROOT = DEPLOY.parent
UNITS = ("tracebus-worker.service", "tracebus-api.service", "tracebus-worker@.service")
#: What ``systemd-analyze verify`` is given: the template as an instance.
VERIFIED = {"tracebus-worker.service": "tracebus-worker.service", "tracebus-api.service": "tracebus-api.service",
            "tracebus-worker@.service": "tracebus-worker@reports.service"}
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
        (tmp_path / VERIFIED[name]).write_text(text)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no",
                           *(str(tmp_path / n) for n in VERIFIED.values())],
                          capture_output=True, text=True, timeout=60)
    about_ours = [line for line in (proc.stdout + proc.stderr).splitlines()
                  if any(n in line for n in VERIFIED.values())]
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


# -- the template unit for any actor modules and queues ------------------------------------------------
def test_the_template_runs_the_instance_modules_on_the_instance_queues():
    text = (DEPLOY / "tracebus-worker@.service").read_text()
    service = unit("tracebus-worker@.service")["Service"]
    # the instance's file is read after the shared one, so its values win
    files = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith("EnvironmentFile=")]
    assert files == ["/etc/tracebus/tracebus.env", "/etc/tracebus/worker-%i.env"]
    # unbraced: one argument per module; braced: the queue list stays one argument
    assert service["ExecStart"] == (f"{PREFIX}/.venv/bin/tracebus worker $TRACEBUS_WORKER_MODULES "
                                    "--queues ${TRACEBUS_WORKER_QUEUES}")
    assert service["Type"] == "notify" and service["KillMode"] == "mixed" and service["OOMPolicy"] == "continue"
    drain_s = int(env_file()["TRACEBUS_GRACEFUL_TIMEOUT_SECONDS"])
    assert seconds(service["TimeoutStopSec"]) >= drain_s + 15
    assert megabytes(service["MemoryMax"]) > megabytes(service["MemoryHigh"])
    assert service["SyslogIdentifier"] == "tracebus-worker-%i"


def test_the_example_instance_file_starts_a_real_pool(supervisor):
    from tracebus.commands._environment import read_env_file

    instance = read_env_file(str(DEPLOY / "worker-instance.env"))
    modules = instance["TRACEBUS_WORKER_MODULES"].split()  # as systemd splits $VAR
    # the command line the unit runs, as systemd expands it: a supervisor that starts its workers
    pool = supervisor("--queues", instance["TRACEBUS_WORKER_QUEUES"], processes=1, modules=modules)
    pool.wait(lambda: pool.broker.queues() == instance["TRACEBUS_WORKER_QUEUES"].split(","), 10,
              message="the instance's queues declared")
    pool.send_signal(signal.SIGTERM)
    assert pool.wait_exit(20) == 0


# -- the sample-data step --------------------------------------------------------------------------------
def test_the_sample_data_step_writes_where_the_services_read_whatever_the_folder(tmp_path):
    values = env_file()
    assert values["TRACEBUS_SQLITE_PATH"] == "/var/lib/tracebus/sample.db"  # absolute: cwd does not matter
    for name in ("tracebus-worker.service", "tracebus-api.service", "tracebus-worker@.service"):
        assert unit(name)["Service"]["StateDirectory"] == "tracebus"  # /var/lib/tracebus, owned by User=
    readme = (DEPLOY / "README.md").read_text()
    step = "sudo -u tracebus /opt/tracebus/.venv/bin/tracebus --env-file /etc/tracebus/tracebus.env sample-data"
    assert step in readme
    # the documented command, run from an unrelated folder with a copy of the env file whose
    # path points into this test's directory: the database lands at that absolute path
    target = tmp_path / "state" / "sample.db"
    target.parent.mkdir()
    copy = tmp_path / "tracebus.env"
    copy.write_text((DEPLOY / "tracebus.env").read_text().replace("/var/lib/tracebus/sample.db", str(target)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE", "REDIS_URL"))}
    proc = subprocess.run([sys.executable, "-m", "tracebus", "--env-file", str(copy), "sample-data",
                           "--scale", "0.01"], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert target.is_file() and not list(elsewhere.iterdir())


# -- nginx ------------------------------------------------------------------------------------------------
NGINX = DEPLOY / "nginx" / "tracebus.conf"


def test_nginx_streams_unbuffered_with_long_timeouts_and_overwrites_identity_headers():
    text = NGINX.read_text()
    assert "client_max_body_size 8m;" in text
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in text and "return 301 https://" in text
    stream = text[text.index("location ~ ^/api/(trace/"):]
    stream = stream[:stream.index("}")]
    for path in ("stream", "events", "result", "mid-section-defect/export"):
        assert path in stream.splitlines()[0]
    assert "proxy_buffering off;" in stream and "gzip off;" in stream
    sse_max_s = int(env_file()["TRACEBUS_API_SSE_MAX_SECONDS"])
    assert int(re.search(r"proxy_read_timeout (\d+)s;", stream)[1]) > sse_max_s
    api_timeout_s = int(env_file()["TRACEBUS_API_TIMEOUT_SECONDS"])
    server_level = text[:text.index("location / {")]
    assert int(re.search(r"proxy_read_timeout (\d+)s;", server_level)[1]) >= api_timeout_s
    # identity headers are set at server level (inherited by every location, none overrides them)
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in server_level
    assert "proxy_set_header X-User-Id $tracebus_user;" in server_level
    assert text.count("proxy_set_header") == server_level.count("proxy_set_header")


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_nginx_accepts_the_config(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=tracebus.example", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    site = tmp_path / "tracebus.conf"
    site.write_text(NGINX.read_text().replace("/etc/ssl/tracebus/fullchain.pem", str(cert))
                    .replace("/etc/ssl/tracebus/privkey.pem", str(key)))
    main = tmp_path / "nginx.conf"
    main.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
                    f"http {{ access_log off; client_body_temp_path {tmp_path}/body; include {site}; }}\n")
    proc = subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(main), "-e", str(tmp_path / "error.log")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "test is successful" in proc.stderr, proc.stderr


def test_readme_covers_templates_auth_log_shipping_and_rollback():
    text = (DEPLOY / "README.md").read_text()
    for fact in ("## Worker pools for your own actors", "tracebus-worker@reports", "## Authentication",
                 "TRACEBUS_API_TOKENS_FILE", "auth_request", "### Log shipping", "journalctl -o json",
                 "## Upgrade and roll back", "queues pause trace-events", "previous-release",
                 "deploy/nginx/tracebus.conf", "--env-file /etc/tracebus/tracebus.env"):
        assert fact in text, fact


def test_the_env_file_lists_every_rate_limit_bucket_with_its_default():
    from api.ratelimit import default_limits

    text = " ".join(line.lstrip("# ") for line in (DEPLOY / "tracebus.env").read_text().splitlines())
    for name, limit in default_limits().items():
        assert f"{name}={limit.max_hits}/{limit.window_s}" in text, name
