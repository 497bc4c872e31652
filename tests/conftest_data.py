"""Session fixture: the scale-0.01 synthetic database, generated once per test session; and
:func:`cached_sample`, the larger samples generated once and kept on disk across runs.

A cached sample's file name carries a digest of the generator's source (and the scale and
seed), so a change to the generator makes a new file instead of reusing a stale one. Tests
only read these files (``SqliteSource`` opens them ``mode=ro``); the file is made read-only
too, so that a test writing to it fails (except as root) instead of spoiling the cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path

import pytest

from tracebus.trace import domains, synth
from tracebus.trace.synth import DEFAULT_SEED, generate

#: The generator's source: the synth package (wherever it lives) and the domain definitions.
_GENERATOR = sorted(Path(synth.__file__).parent.rglob("*.py")) + [Path(domains.__file__)]


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory) -> Path:
    """Path of a scale-0.01 synthetic MES database (about 1,200 containers, 20K event rows)."""
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    generate(path, scale=0.01)
    return path


def cached_sample(config: pytest.Config, scale: float, seed: int = DEFAULT_SEED) -> Path:
    """The synthetic database of ``scale`` from the on-disk cache, generated on first use.

    The cache is pytest's (``.pytest_cache``) or, under ``-p no:cacheprovider``, a folder of
    the system's temporary directory. Concurrent sessions (pytest-xdist workers) take a file
    lock, so one of them generates and the others wait for it.
    """
    digest = hashlib.sha256(repr((scale, seed)).encode())
    for source in _GENERATOR:
        digest.update(source.read_bytes())
    cache = getattr(config, "cache", None)
    directory = (Path(cache.mkdir("tracebus-samples")) if cache is not None
                 else Path(tempfile.gettempdir()) / f"tracebus-test-samples-{os.getuid()}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"sample-{scale}-{seed}-{digest.hexdigest()[:16]}.db"
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            if cache is not None:  # this checkout's own cache: an older generator's file is stale
                for stale in directory.glob(f"sample-{scale}-{seed}-*.db"):
                    stale.unlink()
            started = time.monotonic()
            generate(path, scale=scale, seed=seed)
            path.chmod(0o444)
            print(f"\ngenerated the scale-{scale} sample in {time.monotonic() - started:.1f} s")
    return path
