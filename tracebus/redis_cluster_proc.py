"""A private 3-master Redis Cluster of real redis-server processes (the test suite and bench/).

Each master is a :class:`tracebus.redis_proc.RedisServer` started with ``cluster-enabled yes``
in its own directory on a free port (its cluster bus on another: ``cluster-port``). What ``redis-cli --cluster create`` does is done here
in Python: give each node an equal range of the 16384 slots (CLUSTER ADDSLOTSRANGE) and a
distinct config epoch, introduce them (CLUSTER MEET), then wait until every node reports
``cluster_state:ok`` and knows every slot. :attr:`url` is the ``redis+cluster://`` URL that
tracebus takes in ``REDIS_URL``.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from tracebus.redis_proc import RedisServer, free_port

#: Hash slots of a Redis Cluster.
SLOTS = 16384


class RedisClusterServers:
    """``masters`` redis-server processes forming one cluster, data under ``directory``."""

    def __init__(self, directory: Path, masters: int = 3):
        self.directory = Path(directory)
        self.bus_ports = [free_port() for _ in range(masters)]
        self.nodes = [RedisServer(self.directory / f"node{i}",
                                  ("--cluster-enabled", "yes",
                                   "--cluster-config-file", "nodes.conf",
                                   "--cluster-node-timeout", "5000",
                                   "--cluster-port", str(bus),
                                   "--cluster-require-full-coverage", "yes"))
                      for i, bus in enumerate(self.bus_ports)]
        seeds = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        self.url = f"redis+cluster://{seeds}"

    def start(self, timeout_s: float = 20.0) -> "RedisClusterServers":
        try:
            for node in self.nodes:
                node.start()
            self._form(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, timeout_s: float) -> None:
        clients = [redis.Redis(host="127.0.0.1", port=n.port, socket_timeout=5) for n in self.nodes]
        try:
            share = SLOTS // len(clients)
            for i, client in enumerate(clients):
                last = SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            for node, bus in zip(self.nodes[1:], self.bus_ports[1:]):
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)
            deadline = time.monotonic() + timeout_s
            while not all(_formed(c, len(clients)) for c in clients):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Redis Cluster on {self.url} did not form in {timeout_s}s")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def flushall(self) -> None:
        """Empty every master (a clean cluster per test)."""
        for node in self.nodes:
            client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=5)
            try:
                client.flushall()
            finally:
                client.close()

    def node_clients(self) -> list[redis.Redis]:
        """One plain client per master (to look at what each shard holds)."""
        return [redis.Redis(host="127.0.0.1", port=n.port) for n in self.nodes]

    def __enter__(self) -> "RedisClusterServers":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _formed(client: redis.Redis, masters: int) -> bool:
    info = client.execute_command("CLUSTER", "INFO")
    text = info.decode() if isinstance(info, bytes) else str(info)
    fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    return (fields.get("cluster_state") == "ok" and fields.get("cluster_slots_assigned") == str(SLOTS)
            and fields.get("cluster_known_nodes") == str(masters))
