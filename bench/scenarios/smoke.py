"""``smoke``: checks the bench harness itself in a few seconds (Redis, a supervisor, RSS sampling).

Sends a few hundred no-op messages to a 1-process tracebus supervisor and waits until
they ran. Useful after changing bench/common.py, and as the smallest example of a scenario.
"""

from __future__ import annotations

import psutil
import redis

from bench.common import RssSampler, fmt_stat, summarize, wait_until

NAME = "smoke"
HELP = "a few seconds: check the harness (private Redis, supervisor, RSS sampling)"
DEFAULT_REPEAT = 1


def run(args, ctx) -> dict:
    from tracebus.engine.actor import set_broker
    from tracebus.engine.broker import Broker
    from api.settings import ApiSettings

    from bench import counter, noop

    server = ctx.redis()
    settings = ApiSettings.from_env({"REDIS_URL": server.url})
    broker = Broker(settings)
    set_broker(broker)
    n = max(1, int(500 * args.scale))
    client = redis.Redis.from_url(server.url)
    sup = ctx.supervisor(server.url, ["bench.noop"], processes=1, queues="bench",
                         env={counter.URL_ENV: server.url})
    sampler = RssSampler()
    sampler.add("supervisor", lambda: [psutil.Process(sup.pid)])
    sampler.add("workers", sup.children)
    times = []
    with sampler:
        for i in range(args.repeat):
            counter.reset(client)
            ctx.step(f"round {i + 1}: sending {n}")
            noop.noop.send_many([(j,) for j in range(n)])
            times.append(wait_until(lambda: counter.total(client) >= n, 60, what="all ran"))
    ctx.step(f"ran {n} in {times[-1]:.2f}s")
    return {"summary": "Harness check only; these numbers mean nothing.",
            "tables": [{"title": "Smoke", "columns": ["messages", "seconds", "peak RSS MB"],
                        "rows": [[n, fmt_stat(summarize(times), 2), sampler.peaks_mb()]]}],
            "data": {"seconds": times, "peaks_mb": sampler.peaks_mb()}}
