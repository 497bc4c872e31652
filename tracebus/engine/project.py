"""Which Redis a process of a project uses when ``REDIS_URL`` is not set: one rule for the
library, the CLI and ``tracebus worker``.

``tracebus up`` records the URL of the Redis it serves in ``<data dir>/redis.url`` while it
runs (the data dir is ``var/`` of the project folder). A process that is not given
``REDIS_URL`` looks for the nearest ``var/`` in its folder and the folders above: when that is
a tracebus data dir, its ``redis.url`` is the Redis, and its absence (``up`` is not running)
is an error that says so, never a silent fall back to the default on port 6379. Outside a
project (no such folder) the default stands.
"""

from __future__ import annotations

from pathlib import Path

from tracebus.errors import ConfigError

#: ``tracebus up``'s default data dir, relative to the project folder.
DATA_DIR = "var"
#: The file ``tracebus up`` writes in its data dir: the URL of the Redis it serves.
REDIS_URL_FILE = "redis.url"
#: What ``tracebus up`` leaves in a data dir it ran in (a folder named var/ with none of
#: them is not ours).
_MARKS = (REDIS_URL_FILE, "sample.db", "up.lock", "redis")


def find_data_dir(start: Path | None = None) -> Path | None:
    """The nearest tracebus data dir: ``var/`` in ``start`` (default: the current folder) or a
    parent, holding what ``tracebus up`` leaves there."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        candidate = folder / DATA_DIR
        if candidate.is_dir() and any((candidate / mark).exists() for mark in _MARKS):
            return candidate
    return None


def read_url_file(path: Path) -> str:
    """The URL in a ``redis.url`` file ("" when it is gone or empty)."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def project_redis_url(start: Path | None = None) -> tuple[str, Path] | None:
    """``(url, redis.url path)`` of the project's running ``tracebus up``; None outside a project.

    Raises:
        ConfigError: the project has a data dir but no ``redis.url`` in it (``up`` is not running).
    """
    data_dir = find_data_dir(start)
    if data_dir is None:
        return None
    path = data_dir / REDIS_URL_FILE
    url = read_url_file(path)
    if not url:
        raise ConfigError(f"REDIS_URL is not set and {path} is absent: `tracebus up` is not running in "
                          f"this project (start it, or set REDIS_URL)")
    return url, path
