"""Where a command's configuration comes from: ``--redis-url``, ``--env-file``, ``redis.url``.

Not a command. Precedence for ``REDIS_URL``: the ``--redis-url`` flag, then the process
environment, then the ``--env-file``, then the ``redis.url`` file that ``tracebus up``
writes in its data dir (``var/redis.url``, looked for in the current folder and its
parents), the library's rule (:mod:`tracebus.engine.project`): in a project whose ``up`` is
not running that is an error that says so; outside a project, the default. An env file (the systemd ``EnvironmentFile`` format that
``deploy/tracebus.env`` uses) fills in every variable the environment does not set; the
result is put into ``os.environ``, so settings, lazily made brokers and child processes
all see the same configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import MutableMapping

from tracebus.engine.project import DATA_DIR, REDIS_URL_FILE, project_redis_url  # noqa: F401
from tracebus.errors import ConfigError


def read_env_file(path: str) -> dict[str, str]:
    """``NAME=value`` lines (``#`` comments, blank lines, optional double or single quotes).

    Raises:
        ConfigError: the file cannot be read, or a line is not an assignment.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--env-file: cannot read {path}: {e.strerror}") from None
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or not name.replace("_", "").isalnum():
            raise ConfigError(f"--env-file {path}, line {number}: expected NAME=value, got {line[:60]!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        values[name] = value
    return values


def apply(redis_url: str | None, env_file: str | None, use_url_file: bool = True,
          environ: MutableMapping[str, str] | None = None) -> str:
    """Resolve the configuration into ``environ`` (default ``os.environ``).

    Returns:
        str: where ``REDIS_URL`` came from, for messages (``--redis-url``, ``REDIS_URL``,
        ``--env-file PATH``, ``PATH/var/redis.url`` or ``default``).
    """
    environ = os.environ if environ is None else environ
    from_env = bool(environ.get("REDIS_URL"))
    file_values = read_env_file(env_file) if env_file else {}
    for name, value in file_values.items():
        if not environ.get(name):
            environ[name] = value
    if redis_url:
        environ["REDIS_URL"] = redis_url
        return "--redis-url"
    if from_env:
        return "REDIS_URL"
    if file_values.get("REDIS_URL"):
        return f"--env-file {env_file}"
    found = project_redis_url() if use_url_file else None
    if found is not None:
        environ["REDIS_URL"] = found[0]
        return str(found[1])
    return "default"


def write_redis_url(data_dir: Path, url: str) -> Path:
    """Record ``url`` in ``<data_dir>/redis.url`` (atomically: readers never see half a URL)."""
    path = data_dir / REDIS_URL_FILE
    tmp = path.with_name(f".{REDIS_URL_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may carry a password
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(url + "\n")
    os.replace(tmp, path)
    return path


def remove_redis_url(path: Path, url: str) -> None:
    """Delete the file written by :func:`write_redis_url` unless another run replaced it."""
    try:
        if path.read_text(encoding="utf-8").strip() == url:
            path.unlink()
    except OSError:
        pass
