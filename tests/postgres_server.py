"""The test suite's private PostgreSQL: one server per session (per xdist worker), started on
first use, and the scale-0.01 sample loaded into its database ``sample`` once.

The server class lives in :mod:`tracebus.pg_proc` (``tracebus up`` and bench start theirs
with it): initdb into a temporary folder, 127.0.0.1 on a free port, fsync off, run as the
``postgres`` OS user when the suite runs as root. Never the machine's own server on 5432.
Fixtures: ``postgres_server`` (the :class:`PostgresServer`; ``.database(name)`` makes a
database of one's own) and ``postgres_sample`` (the URL of the sample database, which tests
only read; a test that writes makes a copy: ``postgres_server.database(name, template="sample")``).
"""

from __future__ import annotations

import time

import pytest

from tracebus.pg_proc import PostgresServer
from tracebus.trace.synth import DEFAULT_SEED
from tracebus.trace.synth.postgres import generate_postgres

__all__ = ["PostgresServer", "postgres_sample", "postgres_server"]

#: The database of the sample on the session's server.
SAMPLE_DATABASE = "sample"


@pytest.fixture(scope="session")
def postgres_server():
    try:
        server = PostgresServer().start()
    except RuntimeError as e:  # absence of PostgreSQL is a failure, never a skip
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_sample(postgres_server) -> str:
    """URL of a database holding the scale-0.01 sample: the same rows as the ``sample_db`` file."""
    started = time.monotonic()
    dsn = postgres_server.database(SAMPLE_DATABASE)
    generate_postgres(dsn, scale=0.01, seed=DEFAULT_SEED, replace=True)
    print(f"\nloaded the scale-0.01 sample into PostgreSQL in {time.monotonic() - started:.1f} s")
    return dsn
