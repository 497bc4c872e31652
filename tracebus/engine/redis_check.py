"""The Redis settings tracebus needs, checked at start by the supervisor and the API.

Queue entries, job state and results live only in Redis, so:

* ``maxmemory-policy`` must be ``noeviction``. Any other policy lets Redis delete keys
  under memory pressure -- an undelivered stream entry, a job hash, a result chunk --
  which loses work silently. With ``noeviction`` a full Redis refuses writes instead,
  which tracebus reports as an error. An evicting policy is refused
  (:class:`UnsupportedRedis`), even when ``maxmemory`` is 0, because it only takes a
  ``CONFIG SET maxmemory`` to turn eviction on.
* AOF persistence (``appendonly yes``) with ``appendfsync everysec``: without it a
  Redis restart loses every queued message and running job; ``always`` is slow under
  the result writes, ``no`` can lose about 30 s of writes. Both are warnings.

The policy and AOF state are read from ``INFO`` (allowed where ``CONFIG`` is disabled,
as on many managed services); ``appendfsync`` needs ``CONFIG GET`` and is skipped with
a warning when that command is refused.
"""

from __future__ import annotations

import redis

from tracebus.engine.cluster_client import is_cluster
from tracebus.engine.connection import redact
from tracebus.engine.redis_errors import translate_errors
from tracebus.engine.errors import UnsupportedRedis

#: The only ``maxmemory-policy`` tracebus accepts.
REQUIRED_POLICY = "noeviction"
#: The ``appendfsync`` value tracebus recommends.
RECOMMENDED_FSYNC = "everysec"


def evaluate(policy: str, aof_enabled: bool, appendfsync: str | None, where: str = "Redis") -> list[str]:
    """Judge the settings (a pure function of what the server reported).

    Args:
        policy(str): ``maxmemory-policy``.
        aof_enabled(bool): ``appendonly`` is on.
        appendfsync(str | None): ``appendfsync``, or None when it could not be read.
        where(str): how to name the server in messages (e.g. ``"Redis at redis://h:6379/0"``).

    Returns:
        list[str]: warnings, one sentence each (empty when everything is as recommended).

    Raises:
        UnsupportedRedis: the policy evicts keys.
    """
    if policy != REQUIRED_POLICY:
        raise UnsupportedRedis(
            f"{where} has maxmemory-policy {policy}: it may evict queued messages and job state, "
            f"so tracebus refuses to use it. Set 'maxmemory-policy noeviction' in redis.conf and "
            f"run 'CONFIG SET maxmemory-policy noeviction' on the running server.")
    warnings = []
    if not aof_enabled:
        warnings.append(
            f"{where} has appendonly no: a Redis restart loses every queued message and running "
            f"job; set 'appendonly yes' and 'appendfsync everysec'")
    elif appendfsync is None:
        warnings.append(f"{where}: cannot read appendfsync (CONFIG refused); make sure it is everysec")
    elif appendfsync != RECOMMENDED_FSYNC:
        cost = ("fsyncs every write, which slows result writes" if appendfsync == "always"
                else "leaves fsync to the OS and can lose about 30 s of writes on a crash")
        warnings.append(f"{where} has appendfsync {appendfsync}: it {cost}; set 'appendfsync everysec'")
    return warnings


@translate_errors
def check_redis_config(client: redis.Redis, url: str = "") -> list[str]:
    """Read the server's settings and judge them (see :func:`evaluate`).

    Args:
        client(redis.Redis): a client of the server to check.
        url(str): the server's URL, only for the messages.

    Returns:
        list[str]: warnings for the caller to log.

    Raises:
        UnsupportedRedis: the server may evict keys.
        BrokerConnectionError: the server is unreachable.
    """
    if is_cluster(client):  # every master keeps its own settings: judge each
        return [warning for node in client.get_primaries()
                for warning in check_redis_config(node.redis_connection, f"{node.host}:{node.port}")]
    where = f"Redis at {redact(url)}" if url else "Redis"  # a log line: never the password
    memory = client.info("memory")
    persistence = client.info("persistence")
    policy = str(memory.get("maxmemory_policy", "")).lower()
    aof_enabled = str(persistence.get("aof_enabled", "0")) == "1"
    appendfsync = None
    if aof_enabled:
        try:
            appendfsync = str(client.config_get("appendfsync").get("appendfsync", "")).lower() or None
        except redis.ResponseError:  # CONFIG disabled or renamed (managed Redis, ACLs)
            appendfsync = None
    return evaluate(policy, aof_enabled, appendfsync, where)
