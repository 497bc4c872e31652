"""Writes that must not be lost in a failover: run, then WAIT for replicas to have them.

Redis replicates asynchronously: a write the primary acknowledged can be missing on the
replica Sentinel promotes. With ``TRACEBUS_REDIS_WAIT_REPLICAS`` = N > 0, the writes that
must survive (job creation, a unit's commit and completion) are followed by ``WAIT N
timeout`` on the same connection (one pipeline); fewer acknowledgements within
``TRACEBUS_REDIS_WAIT_TIMEOUT_MS`` count as "Redis is moving" (BrokerConnectionError): the
unit is redone, the API answers 503. The cost is a replication round trip per such write
(bench/ measures it); with 0 (the default) nothing is waited for.
"""

from __future__ import annotations

from tracebus.engine.cluster_client import is_cluster
from tracebus.engine.errors import BrokerConnectionError


def run_acknowledged(client, script, keys: list, args: list, replicas: int, timeout_ms: int,
                     also: list | tuple = ()):
    """Run the registered Lua ``script``; with ``replicas`` > 0, WAIT for them after it.

    On a Redis Cluster WAIT is per master: the script and its WAIT go to the master owning
    ``keys`` (one slot), and the master of each key in ``also`` (writes made just before on
    other slots, e.g. a unit's chunks) is waited for first.

    Callers translate driver errors (:func:`tracebus.engine.redis_errors.redis_errors`).

    Raises:
        BrokerConnectionError: fewer than ``replicas`` replicas acknowledged in ``timeout_ms``.
    """
    if replicas <= 0:
        return script(keys=keys, args=args)
    if is_cluster(client):
        home = client.get_node_from_key(keys[0])
        for other in {client.get_node_from_key(k).name: client.get_node_from_key(k) for k in also}.values():
            if other.name != home.name:
                _check(client.get_redis_connection(other).execute_command("WAIT", replicas, timeout_ms),
                       replicas, timeout_ms)
        client = client.get_redis_connection(home)
    pipe = client.pipeline(transaction=False)
    script(keys=keys, args=args, client=pipe)
    pipe.execute_command("WAIT", replicas, timeout_ms)
    result, acked = pipe.execute()
    _check(acked, replicas, timeout_ms)
    return result


def _check(acked, replicas: int, timeout_ms: int) -> None:
    if int(acked) < replicas:
        raise BrokerConnectionError(f"Redis: a write reached {acked} of {replicas} replicas "
                                    f"within {timeout_ms} ms (TRACEBUS_REDIS_WAIT_REPLICAS)")
