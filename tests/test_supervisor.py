"""The supervisor as a real process tree: crash recovery under SIGKILL, leases, draining,
quick stops, rolling and resizing the pool, and halting on a boot failure.

Each test runs ``python -m tracebus worker tests.actors`` in its own session (see
tests/conftest_proc.py) and watches what the actors record in Redis.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests import actors
from tests.conftest import TOPOLOGIES
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.engine import supervisor as supervisor_mod
from tracebus.engine.spawn import HANDLED_SIGNALS
from tracebus.engine.registry import WorkerRegistry


@pytest.mark.parametrize("topology", TOPOLOGIES, indirect=True)
def test_two_workers_run_2000_messages_while_workers_are_killed_mid_message(supervisor):
    # Given a pool of two and 2,000 messages, one in twenty of them slow
    pool = supervisor(processes=2)
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    broker.enqueue_many([actors.slow_record.message((n, 0.1)) if n % 20 == 0
                         else actors.record.message((n,)) for n in range(2000)])

    def worker_inside_a_slow_message():
        started = client.hgetall(f"{prefix}:test:started")  # the slow ones begun: at most 100
        if not started:
            return None
        begun = list(started)
        finished = client.hmget(f"{prefix}:test:runs", begun)  # (not HGETALL of up to 2,000 runs)
        live = pool.workers()
        return next((int(started[n]) for n, runs in zip(begun, finished)
                     if runs is None and int(started[n]) in live), None)

    # When a worker is SIGKILLed in the middle of a message, five times
    killed = []
    for _ in range(5):
        pid = pool.wait(worker_inside_a_slow_message, 20, "a worker inside slow_record")
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        # Then the supervisor replaces it
        pool.wait_workers(2, without=killed)

    # Then every message ran to completion at least once and nothing is left anywhere
    pool.wait(lambda: client.hlen(f"{prefix}:test:runs") == 2000, 60, "all 2,000 messages to run")
    assert all(int(count) >= 1 for count in client.hvals(f"{prefix}:test:runs"))
    pool.wait_queue()
    # And the registry lists the two live workers, not the killed ones
    registry = WorkerRegistry(broker)
    pool.wait(lambda: {int(w["pid"]) for w in registry.list()} == pool.workers(), 10, "the registry")
    assert len(registry.list()) == 2
    assert "killed by SIGKILL" in pool.log()


def test_a_message_running_past_the_claim_idle_time_is_not_stolen_from_its_healthy_worker(supervisor):
    # Given a janitor that claims entries idle for 1 s, and a message that runs for 3 s
    pool = supervisor(processes=2, TRACEBUS_CLAIM_MIN_IDLE_MS="1000")
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    actors.slow_record.send(1, 3.0)
    pid = pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    # When it is done (a stolen copy would keep the queue busy until it is done too)
    pool.wait_queue(15)
    # Then it ran once, in the worker that started it
    assert client.hget(f"{prefix}:test:started", 1) == pid
    assert client.hget(f"{prefix}:test:runs", 1) == b"1"
    assert "janitor requeued" not in pool.log()


@ON_NODE_AND_CLUSTER
def test_a_killed_workers_message_runs_again_on_another_worker_within_seconds(supervisor):
    # Given a long message running in one of two workers
    pool = supervisor(processes=2)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    actors.slow_record.send(1, 30.0)
    pid = int(pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start"))

    def restarted_in():
        started = int(client.hget(f"{prefix}:test:started", 1))
        return started if started != pid else None

    # When its worker is SIGKILLed
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    # Then another worker is running it within seconds
    new_pid = pool.wait(restarted_in, 10, "the message to restart in another worker")
    recovery_s = time.monotonic() - killed_at
    print(f"\nrecovery: a SIGKILLed worker's message ran again in {recovery_s:.3f} s")
    assert new_pid in pool.workers()
    assert recovery_s < 5.0


def test_sigterm_drains_the_running_message_acks_it_and_exits_0(supervisor):
    # Given a message running for 1.5 s
    pool = supervisor(processes=2)
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    actors.slow_record.send(1, 1.5)
    pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    # When the supervisor gets SIGTERM
    pool.send_signal(signal.SIGTERM)
    # Then the message finishes and is acked, and the supervisor exits 0
    assert pool.wait_exit(15) == 0
    assert client.hget(f"{prefix}:test:runs", 1) == b"1"
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                           "delayed": 0, "dead": 0}
    assert WorkerRegistry(broker).list() == []


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGQUIT,)],
                         ids=["second-sigterm", "sigquit"])
def test_a_quick_stop_exits_at_once_and_leaves_the_running_message_in_the_queue(supervisor, signals):
    # Given a message that would run for 30 s
    pool = supervisor(processes=2)
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    message = actors.slow_record.send(1, 30.0)
    pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    # When the supervisor is told to stop now (a second SIGTERM during the drain, or SIGQUIT)
    for signum in signals:
        pool.send_signal(signum)
        if signum == signal.SIGTERM:
            pool.wait(lambda: "draining" in pool.log(), 5, "the drain to begin")
    # Then it exits within seconds, and the message is back in the stream, not lost
    assert pool.wait_exit(5) == 0
    assert client.hget(f"{prefix}:test:runs", 1) is None
    assert broker.queue_stats("tests") == {"queue": "tests", "length": 1, "pending": 0,
                                           "delayed": 0, "dead": 0}
    [delivery] = broker.fetch(["tests"], "after", 10, 10)
    assert delivery.message == message


def test_sighup_rolls_every_worker_and_lets_the_running_message_finish(supervisor):
    # Given a pool of two, one of them inside a 1 s message
    pool = supervisor(processes=2)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    before = pool.workers()
    actors.slow_record.send(1, 1.0)
    pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    # When the supervisor gets SIGHUP
    pool.send_signal(signal.SIGHUP)
    # Then two new workers replace the old ones, and the old one finished its message once
    after = pool.wait_workers(2, without=before)
    assert client.hget(f"{prefix}:test:runs", 1) == b"1"
    # And work continues on the new workers
    client.delete(f"{prefix}:test:pids")
    actors.record.send_many([(n,) for n in range(100, 150)])
    pool.wait(lambda: client.hlen(f"{prefix}:test:runs") == 51, 10, "50 more messages")
    assert {int(p) for p in client.smembers(f"{prefix}:test:pids")} <= after
    pool.wait_queue()


def test_sigttin_and_sigttou_grow_and_shrink_the_pool(supervisor):
    pool = supervisor(processes=2)
    pool.send_signal(signal.SIGTTIN)
    pool.wait_workers(3)
    # (one signal at a time: two identical signals sent back to back may merge into one)
    pool.send_signal(signal.SIGTTOU)
    pool.wait_workers(2)
    pool.send_signal(signal.SIGTTOU)
    [survivor] = pool.wait_workers(1)
    actors.record.send(1)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 1), 10, "a message to run")
    assert client.smembers(f"{prefix}:test:pids") == {str(survivor).encode()}


def test_a_sigterm_that_reaches_a_worker_before_its_own_handlers_still_ends_it(settings, monkeypatch):
    # A child runs the supervisor's handlers (which only queue a signal for the supervisor's
    # loop) until run_child resets them. A SIGTERM that came then (a worker retired or drained
    # right after its fork; on a loaded machine that window lasts) was swallowed, and the worker
    # ran on (test_sigttin_and_sigttou_grow_and_shrink_the_pool once waited for it in vain).
    # Here the child sleeps in that window, in the supervisor's Supervisor.spawn, as a slow start.
    real_run_child = supervisor_mod.run_child

    def slow_start(*args):
        time.sleep(1.0)
        real_run_child(*args)

    monkeypatch.setattr(supervisor_mod, "run_child", slow_start)
    sup = supervisor_mod.Supervisor(settings, ["default"], processes=1)
    before = {signum: signal.getsignal(signum) for signum in HANDLED_SIGNALS}
    sup._install_signals()  # what the child inherits, as from Supervisor.run
    try:
        sup.spawn()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    [pid] = sup.children
    os.kill(pid, signal.SIGTERM)  # during its slow start
    deadline = time.monotonic() + 10
    try:
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done[0] == pid, "the worker swallowed its SIGTERM and ran on"
        assert os.WIFSIGNALED(done[1]) and os.WTERMSIG(done[1]) == signal.SIGTERM
    finally:
        if done[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_a_worker_boot_failure_stops_the_supervisor_with_code_3_instead_of_respawning(supervisor):
    # Given a module whose on_worker_boot hook raises
    pool = supervisor(processes=2, modules=("tests.boot_fail_actors",), wait=False)
    # Then the supervisor exits promptly with the boot-error code, having tried once per slot
    assert pool.wait_exit(10) == 3
    log = pool.log()
    assert "the database is down" in log
    assert 1 <= log.count("failed to boot:") <= 2
    assert "supervisor halted" in log


def test_a_draining_workers_message_is_not_stolen_by_another_hosts_janitor(supervisor):
    # Given a message running on supervisor A, and supervisor B (another "host") whose
    # janitor claims entries idle for 1 s
    host_a = supervisor(processes=1, TRACEBUS_CLAIM_MIN_IDLE_MS="1000")
    client, prefix = host_a.broker.client, host_a.broker.keys.prefix
    actors.slow_record.send(1, 2.5)
    [pid] = host_a.workers()
    host_a.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    host_b = supervisor(processes=1, TRACEBUS_CLAIM_MIN_IDLE_MS="1000")
    # When A drains on SIGTERM, longer than the claim time
    host_a.send_signal(signal.SIGTERM)
    assert host_a.wait_exit(15) == 0
    # Then the message ran once, on A; B never took it
    assert client.hget(f"{prefix}:test:started", 1) == str(pid).encode()
    assert client.hget(f"{prefix}:test:runs", 1) == b"1"
    assert host_a.broker.queue_stats("tests") == {"queue": "tests", "length": 0, "pending": 0,
                                                  "delayed": 0, "dead": 0}
    assert "janitor requeued" not in host_b.log()


def test_the_registry_shows_what_each_worker_is_running(supervisor):
    # Given a pool of two, one of them inside a long message
    pool = supervisor(processes=2)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    message = actors.slow_record.send(1, 30.0)
    pid = pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "slow_record to start")
    registry = WorkerRegistry(pool.broker)

    def running():
        return {int(w["pid"]): w["current"] for w in registry.list()}

    # Then the registry lists both workers, and the busy one names its message
    pool.wait(lambda: running() == {**dict.fromkeys(pool.workers(), ""),
                                    int(pid): f"slow_record:{message.message_id}"},
              5, "the registry to show the running message")


def test_workers_exit_when_their_supervisor_dies(supervisor):
    # Given a pool of two
    pool = supervisor(processes=2)
    workers = pool.workers()
    # When the supervisor alone is SIGKILLed
    pool.send_signal(signal.SIGKILL)
    pool.wait_exit(5)
    # Then its workers notice they are orphans and exit instead of running unsupervised
    def running(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    pool.wait(lambda: not any(running(pid) for pid in workers), 5, "the orphaned workers to exit")
