"""Fixtures of the core-engine tests: a broker on the test Redis, an in-process worker, and a
real ``python -m tracebus worker`` supervisor run as a subprocess in its own session.

The supervisor logs to a file (never an undrained pipe) and is always killed, with its whole
process group, at teardown. Waits go through :func:`tests.helpers.wait_for` deadlines; a
failed wait shows the tail of the supervisor's log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import wait_for
from tracebus.engine.actor import set_broker
from tracebus.engine.broker import Broker
from api.settings import ApiSettings
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.worker import Worker

ROOT = Path(__file__).resolve().parent.parent

#: Environment of every supervisor under test; a test overrides what it exercises.
SUPERVISOR_ENV = {
    "TRACEBUS_BLOCK_MS": "100",
    "TRACEBUS_CLAIM_MIN_IDLE_MS": "1000",
    "TRACEBUS_HEARTBEAT_TIMEOUT_SECONDS": "10",
    "TRACEBUS_GRACEFUL_TIMEOUT_SECONDS": "10",
    "TRACEBUS_LOG_LEVEL": "info",
}


@pytest.fixture
def broker(settings):
    """A broker on the test Redis that the test process's actors also send through."""
    b = Broker(settings)
    set_broker(b)
    yield b
    set_broker(None)
    b.close()


@pytest.fixture
def worker(broker):
    """A Worker in the test process (no fork), reading queue ``tests``.

    The worker's time-limit middleware takes over SIGALRM, which pytest-timeout also uses;
    the handler and the timer are put back afterwards.
    """
    import tests.actors  # noqa: F401  (registers the actors)

    handler, timer = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    w = Worker(broker, ["tests"], WorkerSlot())
    w.boot()
    yield w
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, *timer)


def run_until(worker: Worker, condition, timeout_s: float = 10.0, message: str = "condition"):
    """Drive ``worker`` (promote due retries, fetch, run, ack) until ``condition()`` holds."""
    broker = worker.broker

    def step():
        for queue in worker.queues:
            broker.promote_due(queue)
        for delivery in broker.fetch(worker.queues, worker.consumer, 10, 20):
            worker.process(delivery)
        worker.flush_acks()
        return condition()

    return wait_for(step, timeout_s, message=message)


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s children, from ``/proc/PID/task/*/children``: what psutil's
    ``children()`` finds by reading the status of every process on the machine, at a twentieth
    of its CPU (tests poll this every 20 ms)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):  # a kernel without CONFIG_PROC_CHILDREN
        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.NoSuchProcess:
            return []
    pids = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(child) for child in f.read().split()]
        except OSError:
            pass
    return pids


class Supervised:
    """A ``tracebus worker`` supervisor process and the broker a test talks to it through."""

    def __init__(self, broker: Broker, log_path: Path, argv: list[str], env: dict[str, str]):
        self.broker = broker
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.pid = self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait(self, condition, timeout_s: float = 10.0, message: str = "condition"):
        """wait_for, failing with the supervisor's log tail."""
        try:
            return wait_for(condition, timeout_s, message=message)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- supervisor log (tail) ---\n{self.log()[-4000:]}") from None

    def workers(self) -> set[int]:
        """Pids of the live (not zombie) worker processes: the supervisor's forked children
        (same executable), not a helper a library may run (e.g. ``file`` from ``platform``)."""
        try:
            exe = psutil.Process(self.pid).exe()
        except psutil.NoSuchProcess:
            return set()
        live = set()
        for pid in children_of(self.pid):
            try:
                child = psutil.Process(pid)
                if child.status() != psutil.STATUS_ZOMBIE and child.exe() == exe:
                    live.add(pid)
            except psutil.Error:
                pass
        return live

    def wait_workers(self, count: int, timeout_s: float = 10.0, without=()) -> set[int]:
        """Wait until exactly ``count`` workers run and none of them is in ``without``."""
        excluded = set(without)

        def ready():
            pids = self.workers()
            return pids if len(pids) == count and not pids & excluded else None

        return self.wait(ready, timeout_s, f"{count} workers (not {sorted(excluded)})")

    def wait_queue(self, timeout_s: float = 10.0, **expected: int) -> None:
        """Wait until queue ``tests`` has nothing waiting, pending or delayed (and ``dead`` as
        given). Acks are batched after the actor returns, so this is a wait, not a check."""
        want = {"queue": "tests", "length": 0, "pending": 0, "delayed": 0, "dead": 0, **expected}
        self.wait(lambda: self.broker.queue_stats("tests") == want, timeout_s, f"queue stats {want}")

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def wait_exit(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"supervisor still running after {timeout_s}s\n{self.log()[-4000:]}") from None

    def kill(self) -> None:
        """Teardown: SIGKILL the whole session (supervisor and workers) and reap it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


class Supervisors:
    """Starts ``tracebus worker`` supervisors on one Redis under a key prefix of their own, and
    kills every one of them at :meth:`close`.

    ``supervisors("--max-jobs", "5", processes=1, TRACEBUS_X="1")`` starts one and waits for its
    workers. :attr:`broker` is on the same Redis and prefix.
    """

    def __init__(self, redis_url: str, log_dir: Path):
        self.redis_url, self.log_dir = redis_url, log_dir
        self.prefix = f"tb{os.urandom(4).hex()}"
        self.broker = Broker(ApiSettings.from_env({}, redis_url=redis_url, key_prefix=self.prefix))
        self.started: list[Supervised] = []

    def __call__(self, *args: str, processes: int = 2, modules=("tests.actors",), wait: bool = True,
                 **env_overrides: str) -> Supervised:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
        env.update(SUPERVISOR_ENV, REDIS_URL=self.redis_url, TRACEBUS_KEY_PREFIX=self.prefix, **env_overrides)
        argv = [sys.executable, "-m", "tracebus", "worker", *modules, "--processes", str(processes), *args]
        sup = Supervised(self.broker, self.log_dir / f"supervisor-{len(self.started)}.log", argv, env)
        self.started.append(sup)
        if wait:
            sup.wait_workers(processes)
        return sup

    def close(self) -> None:
        for sup in self.started:
            sup.kill()
        self.broker.close()


@pytest.fixture
def supervisor(redis_url, redis_client, tmp_path):
    """Factory: ``supervisor("--max-jobs", "5", processes=1, TRACEBUS_X="1")`` starts one and
    waits for its workers (:class:`Supervisors`, on a flushed database); the actors the test
    sends go through its broker. Every supervisor started is killed at teardown."""
    factory = Supervisors(redis_url, tmp_path)
    set_broker(factory.broker)
    yield factory
    factory.close()
    set_broker(None)
