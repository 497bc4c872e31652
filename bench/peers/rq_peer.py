"""RQ: its forking ``Worker`` and its ``SimpleWorker``, 2 ``rq worker`` processes each."""

from __future__ import annotations

from bench import counter
from bench.peers import BIN

NAME = "rq"
QUEUE = "bench-rq"
BULK = "enqueue_many"
#: The configuration that forks a process per job: it gets fewer jobs (see --rq-fork-jobs).
FORK_LABEL = "RQ Worker (fork, 2 processes)"


def noop(i):
    counter.tick()


class Driver:
    def __init__(self, url: str):
        import redis
        from rq import Queue

        self.url = url
        self.queue = Queue(QUEUE, connection=redis.Redis.from_url(url))

    def enqueue_one(self, n: int) -> None:
        enqueue = self.queue.enqueue
        for i in range(n):
            enqueue(noop, i)

    def enqueue_bulk(self, n: int) -> None:
        prepare = self.queue.prepare_data
        for start in range(0, n, 1000):  # one pipeline per 1,000, like tracebus
            self.queue.enqueue_many([prepare(noop, (i,)) for i in range(start, min(n, start + 1000))])

    def configs(self) -> dict[str, list[list[str]]]:
        def worker(cls: str) -> list[str]:
            return [str(BIN / "rq"), "worker", "-u", self.url, "-w", cls, "--quiet", QUEUE]
        return {"RQ SimpleWorker (2 processes)": [worker("rq.SimpleWorker")] * 2,
                FORK_LABEL: [worker("rq.Worker")] * 2}

    def worker_env(self, label: str = "") -> dict:
        env = {counter.URL_ENV: self.url}
        if label == FORK_LABEL:
            env[counter.DIRECT_ENV] = "1"  # the work horse exits right after the job
        return env

    def remaining(self, client) -> int:
        from rq.registry import StartedJobRegistry

        return len(self.queue) + StartedJobRegistry(queue=self.queue).count
