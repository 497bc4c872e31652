"""``tracebus up --source postgres`` as a user runs it: with no TRACEBUS_POSTGRES_DSN it starts its
own PostgreSQL under ``<data-dir>/postgres``, loads the sample there on first run and keeps it;
the printed example's trace job completes from PostgreSQL; SIGTERM stops every process it
started, the server among them. With TRACEBUS_POSTGRES_DSN set it reads that server and writes
nothing to it; a DSN that does not answer is one line before anything starts.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.helpers import wait_for
from tests.redis_server import free_port
from tests.test_up import SHARED_ENV, Up, gone, run_the_example, up  # noqa: F401  (up is a fixture)


@pytest.fixture
def home():
    """The folder up runs in: one the postgres OS user can enter (pytest's are 0700 to root)."""
    folder = Path(tempfile.mkdtemp(prefix="tracebus-up-pg-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _postgres_of(run: Up) -> psutil.Process:
    return next(p for p in run.descendants() if p.name() == "postgres" and p.parent().pid == run.process.pid)


def _tables(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT relname, n_live_tup + n_dead_tup FROM pg_stat_user_tables").fetchall()
    return dict(rows)


def test_up_source_postgres_runs_on_its_own_server_loads_once_and_sigterm_stops_it(up, home):
    # Given up --source postgres with no DSN: its own server, the sample loaded on first run
    run = up("--source", "postgres", "--scale", "0.01", home=home, **SHARED_ENV)
    run.wait_ready(timeout_s=120)
    out = run.output()
    assert "postgres: started a private PostgreSQL on 127.0.0.1:" in out and "data: 1191 containers loaded" in out
    folder = home / "var" / "postgres"
    dsn = (folder / "url").read_text().strip()
    assert (folder / "url").stat().st_mode & 0o777 == 0o600 and (folder / "data" / "PG_VERSION").exists()
    assert not (home / "var" / "sample.db").exists()
    password = psycopg.conninfo.conninfo_to_dict(dsn)["password"]
    assert password not in out
    server = _postgres_of(run)
    # When the banner's example is run as printed (its CIDs read from that server)
    run_the_example(run, 90)
    # And SIGTERM stops everything, the server too
    procs = run.descendants()
    run.process.terminate()
    assert run.process.wait(timeout=60) == 0
    wait_for(lambda: gone(procs), 30, message="every child of up to exit")
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    # And a second up on the same data dir starts the same server's files and loads nothing
    again = up("--source", "postgres", "--scale", "0.01", home=home, **SHARED_ENV)
    again.wait_ready(timeout_s=120)
    assert "data: using the sample in" in again.output() and "loaded in" not in again.output()
    again.process.terminate()
    assert again.process.wait(timeout=60) == 0


def test_up_with_a_postgres_dsn_reads_it_and_writes_nothing(up, postgres_sample):
    before = _tables(postgres_sample)
    run = up("--source", "postgres", TRACEBUS_POSTGRES_DSN=postgres_sample)
    run.wait_ready(timeout_s=120)
    out = run.output()
    assert "reading the PostgreSQL of TRACEBUS_POSTGRES_DSN (nothing is written to it)" in out
    assert "started a private PostgreSQL" not in out and psycopg.conninfo.conninfo_to_dict(
        postgres_sample)["password"] not in out
    assert not (run.home / "var" / "postgres").exists()
    run.process.terminate()
    assert run.process.wait(timeout=60) == 0
    assert _tables(postgres_sample) == before


def test_up_with_a_postgres_dsn_that_does_not_answer_is_one_line_before_anything_starts(up):
    run = up("--source", "postgres", TRACEBUS_POSTGRES_DSN=f"postgresql://u:s3cret-pw@127.0.0.1:{free_port()}/db")
    assert run.process.wait(timeout=60) == 2
    out = run.output()
    assert "TRACEBUS_POSTGRES_DSN does not answer" in out and "s3cret-pw" not in out
    assert "tracebus is up" not in out


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the postgres OS user is used only when up runs as root")
def test_up_as_root_in_a_folder_the_postgres_user_cannot_enter_is_one_line(up, tmp_path):
    run = up("--source", "postgres", "--scale", "0.01")  # pytest's tmp_path is 0700 to root
    assert run.process.wait(timeout=60) == 2
    out = run.output()
    assert "PostgreSQL runs as the OS user postgres, which cannot enter" in out and "tracebus is up" not in out
    assert [line for line in out.splitlines() if line.startswith("tracebus:")] == [out.splitlines()[-1]]
