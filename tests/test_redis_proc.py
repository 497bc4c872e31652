"""The private redis-server (tracebus/redis_proc.py) answers commands as soon as ``start`` returns.

A restarted server reloads its AOF; meanwhile it answers INFO but every other command with
LOADING. ``start`` used to return on the first INFO, and a test that read right after a restart
failed with ``BusyLoadingError`` (test_outage, once in a CI run under load).
"""

from __future__ import annotations

import redis

from tracebus.redis_proc import RedisServer

#: Enough data that reloading it takes a while (about 64 MB of AOF).
VALUES, VALUE_BYTES = 4096, 16 << 10


def test_a_restarted_server_has_loaded_its_aof_when_start_returns(tmp_path):
    server = RedisServer(tmp_path / "redis", aof=True).start()
    try:
        client = redis.Redis.from_url(server.url)
        pipe = client.pipeline(transaction=False)
        for i in range(VALUES):
            pipe.set(f"k{i}", b"x" * VALUE_BYTES)
        pipe.execute()
        client.close()
        for _ in range(3):
            server.stop()
            server.start()
            client = redis.Redis.from_url(server.url)
            assert client.dbsize() == VALUES  # no BusyLoadingError
            assert client.info("persistence")["loading"] == 0
            client.close()
    finally:
        server.stop()
