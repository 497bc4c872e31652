"""The PostgreSQL server's faults under running jobs (issue 35, item 5), with real workers.

A session killed by the server mid-unit (pg_terminate_backend) and a server restarted mid-job:
the unit is retried and the job completes with every row. A server refusing connections: the
units back off and retry, /readyz names ``source``, and the job completes once the server is
back. A frozen server (SIGSTOP: TCP still answers, PostgreSQL does not) and a network that
drops every packet (a veth link to a server in a network namespace, taken down) are found
within TRACEBUS_SOURCE_DEAD_PEER_S and the worker goes on; a cancel a frozen server never
answers frees the worker by cutting the statement's connection. The restarts and the freeze happen on a
server of this module's own, not the suite's.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time

import psycopg
import pytest
from falcon import testing

from api.app import create_app
from tests import kind_sql
from tests.conftest_trace import trace_service
from tests.test_postgres_control import MODULES, Lock, kind_sql_marks, prepare, running, statements
from tests.helpers import wait_for
from tracebus.pg_proc import PostgresServer, dsn_of

FINAL = ("completed", "partial", "failed", "cancelled")


@pytest.fixture(scope="module")
def own_server():
    try:
        server = PostgresServer().start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    if server.process is not None and server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture
def start(supervisor, sample_db):
    def run(dsn: str, processes: int = 1, **env):
        svc, worker_env = trace_service(sample_db, TRACEBUS_SOURCE="postgres", TRACEBUS_POSTGRES_DSN=dsn, **env)
        sup = supervisor("--queues", svc.settings.queue, processes=processes, modules=MODULES, **worker_env)
        return sup, svc
    return run


def final(sup, svc, job_id: str, timeout_s: float) -> dict:
    return sup.wait(lambda: (d := svc.store.status(job_id))["status"] in FINAL and d, timeout_s, f"{job_id} to end")


def restart(server: PostgresServer) -> None:
    server.process.send_signal(signal.SIGINT)  # a fast shutdown: every session is terminated
    server.process.wait(timeout=30)
    server.start()


def test_a_session_the_server_kills_mid_unit_is_retried_and_the_job_completes(start, postgres_server):
    dsn = prepare(postgres_server)
    lock = Lock(dsn).hold()
    try:
        sup, svc = start(dsn)
        job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick"])
        with psycopg.connect(dsn, autocommit=True) as admin:
            statement = running(sup, admin, job_id)
            pid, _, _, _ = statement
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            sup.wait(lambda: (rows := statements(admin, job_id)) and rows[0][0] != pid, 30, "the unit's retry")
    finally:
        lock.release()
    doc = final(sup, svc, job_id, 30)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 2, doc
    units = {u["unit"]: u for u in svc.store.detail(job_id)["units"]}
    assert units[0]["attempt"] >= 2


def test_a_server_restarted_mid_job_the_job_completes_with_every_row(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn)
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin", "quick", "quick"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    restarted_at = time.monotonic()
    restart(own_server)  # takes the lock with it
    lock.conn = None
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 3, doc
    assert time.monotonic() - restarted_at < 60


def test_a_server_refusing_connections_units_back_off_readyz_names_the_source_and_the_job_completes(
        start, own_server):
    dsn = prepare(own_server)
    sup, svc = start(dsn)
    own_server.process.send_signal(signal.SIGINT)
    own_server.process.wait(timeout=30)
    try:
        job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["quick"])
        ready = testing.TestClient(create_app(svc.settings.replace(rate_limits="off"), sup.broker)).simulate_get(
            "/readyz")
        assert ready.status_code == 503 and "source" in ready.json["missing"], ready.json
        assert ready.json["source"].startswith("unreachable: postgres:")
        assert own_server.password not in ready.text
        sup.wait(lambda: "refused" in (kind_sql_marks(svc, job_id).get("error") or "").lower()
                 or "connect" in (kind_sql_marks(svc, job_id).get("error") or "").lower(), 20,
                 "a refused attempt")
        assert svc.store.status(job_id)["status"] in ("queued", "running")  # backing off, not failed
    finally:
        own_server.start()
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 1, doc
    units = svc.store.detail(job_id)["units"]
    assert units[0]["attempt"] >= 2
    ready = testing.TestClient(create_app(svc.settings.replace(rate_limits="off"), sup.broker)).simulate_get("/readyz")
    assert ready.json["source"] == "ok", ready.json


def test_a_frozen_server_is_found_within_the_dead_peer_limit_and_the_worker_goes_on(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn, TRACEBUS_SOURCE_DEAD_PEER_S="4")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    frozen_at = time.time()
    os.killpg(own_server.process.pid, signal.SIGSTOP)
    try:
        error = sup.wait(lambda: kind_sql_marks(svc, job_id).get("error"), 20, "the frozen server to be found")
        found_after = float(kind_sql_marks(svc, job_id)["ended"]) - frozen_at
    finally:
        os.killpg(own_server.process.pid, signal.SIGCONT)
    assert "TRACEBUS_SOURCE_DEAD_PEER_S" in error, error
    assert found_after < 4 + 2.0, found_after
    lock.release()
    doc = final(sup, svc, job_id, 60)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 1, doc


def test_a_cancel_the_frozen_server_ignores_frees_the_worker_by_cutting_the_connection(start, own_server):
    dsn = prepare(own_server)
    lock = Lock(dsn).hold()
    sup, svc = start(dsn, TRACEBUS_SOURCE_DEAD_PEER_S="120")  # the probe would not look for minutes
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    os.killpg(own_server.process.pid, signal.SIGSTOP)
    try:
        cancelled_at = time.time()
        svc.store.cancel(job_id)
        ended = float(sup.wait(lambda: kind_sql_marks(svc, job_id).get("ended"), 30, "the unit to let go"))
    finally:
        os.killpg(own_server.process.pid, signal.SIGCONT)
        lock.release()
    # The cancel request waits out its 2 s (CANCEL_TIMEOUT_S), then the statement gets 5 s more
    # (SEVER_AFTER_S) before the cut.
    assert ended - cancelled_at < 2 + 5 + 3, ended - cancelled_at
    assert "the job was cancelled" in kind_sql_marks(svc, job_id)["error"]


class _ServerInNamespace(PostgresServer):
    """The module's server, but listening on every address of the network namespace it runs in."""

    def _settings(self) -> list[str]:
        return [s if not s.startswith("-clisten_addresses=") else "-clisten_addresses=*" for s in super()._settings()]


@pytest.fixture(scope="module")
def server_behind_a_link():
    """A PostgreSQL server in a network namespace of its own, reached over a veth pair: taking
    the namespace's end of the link down drops every packet of the open connections silently
    (no reset, no error: what a cut network looks like). Needs root (a network namespace) and
    iproute2's ``ip`` (.ci/run installs it); skipped without them, as the Oracle runs without a DSN."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("cutting a network link needs root and iproute2's ip")
    tag = os.getpid() % 100000
    ns, host_end, ns_end = f"tbtest{tag}", f"tbh{tag}", f"tbn{tag}"
    subnet = f"10.{200 + tag % 50}.{tag // 50 % 250}"
    host_ip, ns_ip = f"{subnet}.1", f"{subnet}.2"

    def ip(*args, netns: bool = False):
        subprocess.run(["ip", *(["netns", "exec", ns, "ip"] if netns else []), *args], check=True)

    subprocess.run(["ip", "netns", "add", ns], check=True)
    server = None
    try:
        ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
        ip("link", "set", ns_end, "netns", ns)
        ip("addr", "add", f"{host_ip}/30", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("addr", "add", f"{ns_ip}/30", "dev", ns_end, netns=True)
        ip("link", "set", ns_end, "up", netns=True)
        ip("link", "set", "lo", "up", netns=True)
        started: dict = {}

        def start_in_namespace():  # a thread's namespace is inherited by the processes it starts
            try:
                fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
                if ctypes.CDLL("libc.so.6", use_errno=True).setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), "setns")
                started["server"] = _ServerInNamespace().start()
            except BaseException as e:
                started["error"] = e

        thread = threading.Thread(target=start_in_namespace)
        thread.start()
        thread.join()
        if "error" in started:
            raise started["error"]
        server = started["server"]
        with open(server.data_dir / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {host_ip}/32 scram-sha-256\n")
        server.process.send_signal(signal.SIGHUP)
        dsn = dsn_of(server.port, server.password, host=ns_ip)
        wait_for(lambda: _connects(dsn), 20, message="the server over the link")
        yield dsn, lambda up: ip("link", "set", ns_end, "up" if up else "down", netns=True)
    finally:
        if server is not None:
            server.stop()
        subprocess.run(["ip", "netns", "del", ns])
        subprocess.run(["ip", "link", "del", host_end], stderr=subprocess.DEVNULL)


def _connects(dsn: str) -> bool:
    try:
        psycopg.connect(dsn, connect_timeout=2).close()
        return True
    except psycopg.OperationalError:
        return False


def test_a_network_that_drops_every_packet_is_found_within_the_dead_peer_limit(start, server_behind_a_link):
    dsn, link = server_behind_a_link
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {kind_sql.LOCKED_TABLE} (x int)")
        if conn.execute(f"SELECT count(*) FROM {kind_sql.LOCKED_TABLE}").fetchone()[0] == 0:
            conn.execute(f"INSERT INTO {kind_sql.LOCKED_TABLE} VALUES (1)")
    lock = Lock(dsn).hold()
    sup, svc = start(dsn, TRACEBUS_SOURCE_DEAD_PEER_S="6")
    job_id = kind_sql.submit(svc.store, svc.dispatcher, svc.settings.queue, ["spin"])
    with psycopg.connect(dsn, autocommit=True) as admin:
        running(sup, admin, job_id)
    cut_at = time.time()
    link(False)
    try:
        error = sup.wait(lambda: kind_sql_marks(svc, job_id).get("error"), 30, "the cut to be found")
        found_after = float(kind_sql_marks(svc, job_id)["ended"]) - cut_at
    finally:
        link(True)
    assert found_after < 6 + 2.0, (found_after, error)
    lock.release()
    doc = final(sup, svc, job_id, 90)
    assert doc["status"] == "completed" and doc["progress"]["rows"] == 1, doc
