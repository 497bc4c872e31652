"""What a forked child runs: reset inherited process state, boot, run a Worker, exit.

Everything process-wide is set up here, after the fork: signal handlers, a reseeded
RNG, a fresh Redis connection (never the supervisor's), the boot hooks (database pools).
The child always leaves through ``os._exit`` with a code from the worker's protocol, so
it never runs the supervisor's cleanup or returns into its loop.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import traceback
from typing import Sequence

from tracebus.engine.actor import set_broker
from tracebus.engine.boot import run_boot_hooks
from tracebus.engine.broker import Broker
from tracebus.engine.wire import connect
from tracebus.engine.identity import consumer_name
from tracebus.engine.middleware import build_stack
from tracebus.engine.settings import Settings
from tracebus.engine.slot import WorkerSlot
from tracebus.engine.worker import EXIT_BOOT_ERROR, Worker

log = logging.getLogger(__name__)

#: The signals the supervisor handles (its ``handle_<name>`` methods); a child resets them to
#: their defaults, and the supervisor blocks them across the fork (``Supervisor.spawn``).
HANDLED = ("TERM", "INT", "QUIT", "HUP", "CHLD", "TTIN", "TTOU")
HANDLED_SIGNALS = frozenset(getattr(signal, f"SIG{name}") for name in HANDLED)


def run_child(settings: Settings, queues, slot: WorkerSlot, boot_id: str, max_jobs: int,
              max_rss_bytes: int, middleware: Sequence[str] = (), parent_pid: int | None = None) -> None:
    """Boot and run one worker in a freshly forked process. Never returns.

    Args:
        middleware: ``module:Class`` specs added to the stack (see
            :func:`tracebus.engine.middleware.build_stack`); instances are made here, after
            the fork, so none shares state with the supervisor.
    """
    code = 1
    try:
        for signum in HANDLED_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        # The supervisor blocked them across the fork: one sent meanwhile is delivered now, to
        # the default action (a SIGTERM ends a worker that has not started).
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
        random.seed()
        if settings.worker_nice:
            # Units are background work: on a host shared with the API, status polls and
            # page reads must not queue behind CPU-bound fetches.
            os.nice(settings.worker_nice)
        try:
            broker = Broker(settings, client=connect(settings, fail_fast=True))
            set_broker(broker)
            worker = Worker(broker, queues, slot, max_jobs=max_jobs, max_rss_bytes=max_rss_bytes,
                            middleware=build_stack(middleware), consumer=consumer_name(tag=boot_id),
                            parent_pid=parent_pid)
            worker.install_signals()
            run_boot_hooks()
            worker.boot()
        except Exception:
            log.error("worker %d failed to boot:\n%s", os.getpid(), traceback.format_exc())
            code = EXIT_BOOT_ERROR
            return
        code = worker.run()
        worker.close()
    except BaseException:
        log.error("worker %d crashed:\n%s", os.getpid(), traceback.format_exc())
        code = 1
    finally:
        logging.shutdown()
        os._exit(code)
