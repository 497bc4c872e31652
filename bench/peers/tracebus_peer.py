"""tracebus: the actor in :mod:`bench.noop`, a supervisor with 2 worker processes."""

from __future__ import annotations

from bench import counter
from bench.peers import python_m

NAME = "tracebus"
QUEUE = "bench"
BULK = "send_many"


class Driver:
    def __init__(self, url: str):
        from tracebus.engine.actor import set_broker
        from tracebus.engine.broker import Broker
        from api.settings import ApiSettings

        from bench import noop

        self.url = url
        self.broker = Broker(ApiSettings.from_env({"REDIS_URL": url}))
        set_broker(self.broker)
        self.noop = noop.noop

    def enqueue_one(self, n: int) -> None:
        send = self.noop.send
        for i in range(n):
            send(i)

    def enqueue_bulk(self, n: int) -> None:
        self.noop.send_many([(i,) for i in range(n)])

    def configs(self) -> dict[str, list[list[str]]]:
        return {"tracebus (2 processes)":
                [python_m("tracebus", "worker", "bench.noop", "--processes", "2", "--queues", QUEUE)]}

    def worker_env(self, label: str = "") -> dict:
        return {"REDIS_URL": self.url, counter.URL_ENV: self.url, "TRACEBUS_LOG_LEVEL": "warning"}

    def remaining(self, client) -> int:
        # Acked entries are deleted, so the stream's length is waiting + unacked.
        return int(client.xlen(self.broker.keys.stream(QUEUE)))
