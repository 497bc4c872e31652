"""The synthetic samples, generated once and kept on disk across runs and checkouts
(:func:`cached_sample`), and the session fixture ``sample_db``: a writable copy of the
scale-0.01 one.

A cached sample's file name carries a digest of the generator's source (and the scale and
seed), so a change to the generator makes a new file instead of reusing a stale one. Tests
only read these files (``SqliteSource`` opens them ``mode=ro``); the file is made read-only
too, so that a test writing to it fails (except as root) instead of spoiling the cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
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
    """Path of a scale-0.01 synthetic MES database (about 1,200 containers, 20K event rows): a
    writable copy, for this session, of the cached sample (a copy is a few milliseconds, the
    generation 0.7 s of CPU in each xdist worker)."""
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    shutil.copyfile(cached_sample(0.01), path)
    return path


#: Where the larger samples are kept: one folder for the machine's user, so that every checkout
#: (a clean clone, each worktree) reuses what another generated with the same generator.
SAMPLE_CACHE = Path(tempfile.gettempdir()) / f"tracebus-test-samples-{os.getuid()}"
#: A sample of an older generator not used for this long is deleted when a new one is made
#: (checkouts of other versions may still use theirs meanwhile).
STALE_AFTER_S = 3 * 86400


def cached_sample(scale: float, seed: int = DEFAULT_SEED) -> Path:
    """The synthetic database of ``scale`` from the on-disk cache (:data:`SAMPLE_CACHE`),
    generated on first use. Concurrent sessions (pytest-xdist workers, other checkouts) take the
    sample's file lock, so one of them generates it and the others wait for that one only.
    """
    digest = hashlib.sha256(repr((scale, seed)).encode())
    for source in _GENERATOR:
        digest.update(source.read_bytes())
    SAMPLE_CACHE.mkdir(parents=True, exist_ok=True)
    path = SAMPLE_CACHE / f"sample-{scale}-{seed}-{digest.hexdigest()[:16]}.db"
    with open(path.with_suffix(".lock"), "w") as lock:  # one per sample: others are not held up
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            os.utime(path)  # in use: not stale
        else:
            for other in SAMPLE_CACHE.glob("sample-*.db"):
                if time.time() - other.stat().st_mtime > STALE_AFTER_S:
                    other.unlink(missing_ok=True)
                    other.with_suffix(".lock").unlink(missing_ok=True)
            started = time.monotonic()
            generate(path, scale=scale, seed=seed)
            path.chmod(0o444)
            print(f"\ngenerated the scale-{scale} sample in {time.monotonic() - started:.1f} s")
    return path
