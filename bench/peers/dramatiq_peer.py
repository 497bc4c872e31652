"""Dramatiq: RedisBroker, ``dramatiq --processes 2`` with 1 and with 8 threads."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench import counter
from bench.peers import python_m

NAME = "dramatiq"
QUEUE = "bench-dramatiq"
BULK = None  # no bulk enqueue API (group().run() sends one by one)

if os.environ.get(counter.URL_ENV):
    dramatiq.set_broker(RedisBroker(url=os.environ[counter.URL_ENV]))


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def noop(i):
    counter.tick()


class Driver:
    def __init__(self, url: str):
        # The module set its broker up at import, from the environment (as the workers do).
        assert os.environ.get(counter.URL_ENV) == url, "set the counter URL before importing"
        self.url = url

    def enqueue_one(self, n: int) -> None:
        send = noop.send
        for i in range(n):
            send(i)

    def configs(self) -> dict[str, list[list[str]]]:
        def cli(threads: int) -> list[str]:
            return python_m("dramatiq", "bench.peers.dramatiq_peer", "--processes", "2",
                            "--threads", str(threads), "--queues", QUEUE)
        return {"Dramatiq (2 processes x 1 thread)": [cli(1)],
                "Dramatiq (2 processes x 8 threads)": [cli(8)]}

    def worker_env(self, label: str = "") -> dict:
        return {counter.URL_ENV: self.url}

    def remaining(self, client) -> int:
        # dramatiq:<q> lists waiting ids; dramatiq:<q>.msgs holds every message until acked.
        return int(client.hlen(f"dramatiq:{QUEUE}.msgs"))
