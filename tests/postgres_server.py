"""The test suite's private PostgreSQL: one server per session (per xdist worker), started on
first use, with the scale-0.01 sample in its database ``sample``, loaded once per machine.

The sample is loaded once into a server whose stopped folder is kept in the samples' cache
(:data:`tests.conftest_data.SAMPLE_CACHE`), keyed as the SQLite samples are by a digest of
the generator's source (and of the loader and the server class); each session's server starts
on a copy of that folder (``cp -a``, a fraction of a second, where initdb and the load take
3-5 s of CPU per xdist worker).

The server class lives in :mod:`tracebus.pg_proc` (``tracebus up`` and bench start theirs
with it): initdb into a temporary folder, 127.0.0.1 on a free port, fsync off, run as the
``postgres`` OS user when the suite runs as root. Never the machine's own server on 5432.
Fixtures: ``postgres_server`` (the :class:`PostgresServer`; ``.database(name)`` makes a
database of one's own) and ``postgres_sample`` (the URL of the sample database, which tests
only read; a test that writes makes a copy: ``postgres_server.database(name, template="sample")``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest_data import _GENERATOR, SAMPLE_CACHE, STALE_AFTER_S
from tracebus import pg_proc
from tracebus.pg_proc import PostgresServer
from tracebus.trace.synth import DEFAULT_SEED
from tracebus.trace.synth import postgres as synth_postgres
from tracebus.trace.synth.postgres import generate_postgres

__all__ = ["PostgresServer", "postgres_sample", "postgres_server"]

#: The database of the sample on the session's server.
SAMPLE_DATABASE = "sample"


def cached_cluster(scale: float = 0.01, seed: int = DEFAULT_SEED) -> Path:
    """The stopped folder of a server holding the sample of ``scale`` in database ``sample``,
    made on first use (under a file lock: one xdist worker makes it, the others wait)."""
    # The server's binaries too: a cluster made by another major version does not start.
    digest = hashlib.sha256(repr((scale, seed, str(pg_proc.bin_dir()))).encode())
    for source in [*_GENERATOR, Path(pg_proc.__file__), Path(synth_postgres.__file__)]:
        digest.update(source.read_bytes())
    SAMPLE_CACHE.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the server runs as the postgres user, which must enter the cache (a 077 umask)
        SAMPLE_CACHE.chmod(SAMPLE_CACHE.stat().st_mode | 0o011)
    path = SAMPLE_CACHE / f"pg-sample-{scale}-{seed}-{digest.hexdigest()[:16]}"
    with open(path.with_name(path.name + ".lock"), "w") as lock:  # one per sample: others are not held up
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            os.utime(path)  # in use: not stale
            return path
        for other in SAMPLE_CACHE.glob("pg-sample-*"):
            if other.is_dir() and time.time() - other.stat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(other, ignore_errors=True)
                other.with_name(other.name + ".lock").unlink(missing_ok=True)
        started = time.monotonic()
        building = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        shutil.rmtree(building, ignore_errors=True)
        server = PostgresServer(building)
        try:
            server.start()
            generate_postgres(server.database(SAMPLE_DATABASE), scale=scale, seed=seed)
        except BaseException:
            server.stop()
            shutil.rmtree(building, ignore_errors=True)
            raise
        server.stop()
        building.rename(path)
        print(f"\nloaded the scale-{scale} sample into a cached PostgreSQL in {time.monotonic() - started:.1f} s")
    return path


@pytest.fixture(scope="session")
def postgres_server():
    """This session's server: a copy of the cached one (the sample already in ``sample``)."""
    try:
        server = PostgresServer(template=cached_cluster()).start()
    except RuntimeError as e:  # absence of PostgreSQL is a failure, never a skip
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_sample(postgres_server) -> str:
    """URL of the database holding the scale-0.01 sample: the same rows as the ``sample_db`` file."""
    return postgres_server.database(SAMPLE_DATABASE)
