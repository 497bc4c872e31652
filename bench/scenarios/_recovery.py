"""The recovery probe of ``throughput``: SIGKILL a tracebus worker mid-message.

Each round sends one :func:`bench.noop.sleeper` message to a 2-process supervisor,
waits until a worker starts it (the actor records its pid and the time in a Redis
list), SIGKILLs that worker, and takes the time until the message starts again
(second record, from another process). The message is then left to finish, so both
workers are idle when the next round begins.
"""

from __future__ import annotations

import os
import signal
import time

from bench import counter
from bench.common import wait_until

QUEUE = "bench-slow"
SLEEP_S = 2


def _records(client, key: str) -> list[tuple[int, float]]:
    out = []
    for raw in client.lrange(key, 0, -1):
        pid, ts = raw.decode().split()
        out.append((int(pid), float(ts)))
    return out


def measure(ctx, url: str, client, rounds: int) -> list[dict]:
    """Run ``rounds`` probes; each result has the seconds from the kill to the restart."""
    from tracebus.engine.actor import set_broker
    from tracebus.engine.broker import Broker
    from api.settings import ApiSettings

    from bench import noop

    client.flushdb()
    broker = Broker(ApiSettings.from_env({"REDIS_URL": url}))
    set_broker(broker)
    sup = ctx.supervisor(url, ["bench.noop"], processes=2, queues=QUEUE, name="recovery",
                         env={counter.URL_ENV: url, "TRACEBUS_LOG_LEVEL": "warning"})
    wait_until(lambda: len(sup.children()) == 2, 20, what="2 tracebus workers")
    time.sleep(0.5)  # let both block in XREADGROUP
    results = []
    for r in range(rounds):
        key = f"bench:recovery:{r}"
        noop.sleeper.send(SLEEP_S, key)
        wait_until(lambda: client.llen(key) >= 1, 10, what="the probe message started")
        victim, _ = _records(client, key)[0]
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: client.llen(key) >= 2, 30, what="the probe message restarted")
        again, restarted_at = _records(client, key)[1]
        seconds = restarted_at - killed_at
        results.append({"seconds": seconds, "killed_pid": victim, "rerun_pid": again})
        ctx.step(f"recovery {r + 1}/{rounds}: killed worker {victim}; running again on "
                 f"{again} after {seconds:.3f}s")
        stream = broker.keys.stream(QUEUE)
        wait_until(lambda: client.xlen(stream) == 0, SLEEP_S + 30, what="the probe message finished")
        wait_until(lambda: len(sup.children()) == 2, 20, what="the killed worker replaced")
    sup.stop()
    return results
