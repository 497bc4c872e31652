"""Celery: Redis broker, no result backend, prefork pool with concurrency 2."""

from __future__ import annotations

import os

from celery import Celery

from bench import counter
from bench.peers import python_m

NAME = "celery"
QUEUE = "bench-celery"
BULK = None  # no bulk enqueue API (group().apply_async() publishes one by one)

app = Celery("bench", broker=os.environ.get(counter.URL_ENV, "redis://127.0.0.1:6379/0"))
app.conf.update(task_ignore_result=True, result_backend=None, task_default_queue=QUEUE,
                worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)


@app.task(name="bench.noop")
def noop(i):
    counter.tick()


class Driver:
    def __init__(self, url: str):
        self.url = url
        app.conf.broker_url = url

    def enqueue_one(self, n: int) -> None:
        delay = noop.delay
        for i in range(n):
            delay(i)

    def configs(self) -> dict[str, list[list[str]]]:
        return {"Celery (prefork, concurrency 2)":
                [python_m("celery", "-A", "bench.peers.celery_peer", "worker", "--pool", "prefork",
                          "--concurrency", "2", "-Q", QUEUE, "--loglevel", "WARNING",
                          "--without-gossip", "--without-mingle", "--without-heartbeat")]}

    def worker_env(self, label: str = "") -> dict:
        return {counter.URL_ENV: self.url}

    def remaining(self, client) -> int:
        # kombu's Redis transport: a list per queue, and the "unacked" hash of delivered messages.
        return int(client.llen(QUEUE)) + int(client.hlen("unacked"))
