"""The ``redis+cluster://`` branch of ``REDIS_URL``: a redis-py RedisCluster from seed nodes.

``redis+cluster://[user:password@]host1:port1,host2:port2[/0][?ssl=1]`` names a few nodes of
a Redis Cluster; redis-py's own :class:`redis.cluster.RedisCluster` discovers the rest and
follows MOVED/ASK itself. Only database 0 exists on a cluster, so any other is refused;
no seed answering is a :class:`~tracebus.engine.errors.BrokerConnectionError`.
The one connection factory, :func:`tracebus.engine.connection.redis_client`, calls
:func:`cluster_client` for this scheme (and ``rediss+cluster://``, with TLS).
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from redis.cluster import ClusterNode, RedisCluster

from tracebus.engine.errors import UnsupportedRedis
from tracebus.engine.redis_errors import redis_errors

SCHEME = "redis+cluster"


def cluster_seeds(url: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` seed nodes of a ``redis+cluster://`` URL.

    Raises:
        UnsupportedRedis: no seed, a seed without a valid port, or a database other than 0.
    """
    parts = urlsplit(url)
    hosts = parts.netloc.rsplit("@", 1)[-1]
    seeds = []
    for seed in filter(None, hosts.split(",")):
        host, _, port = seed.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UnsupportedRedis(f"{SCHEME} URL {_safe(url)}: seed {seed!r} is not host:port")
        seeds.append((host.strip("[]"), int(port)))
    if not seeds:
        raise UnsupportedRedis(f"{SCHEME} URL {_safe(url)} names no seed node (host:port,...)")
    db = parts.path.strip("/")
    if db not in ("", "0"):
        raise UnsupportedRedis(f"{SCHEME} URL {_safe(url)}: a Redis Cluster has only database 0, not {db!r}")
    return seeds


def cluster_client(url: str, **opts) -> RedisCluster:
    """A RedisCluster client for a ``redis+cluster://`` URL; ``opts`` go to every node connection."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        auth = parts.netloc.rsplit("@", 1)[0]
        user, _, password = auth.partition(":")
        if password:
            opts.setdefault("username", unquote(user) or None)
            opts.setdefault("password", unquote(password))
        else:
            opts.setdefault("password", unquote(user))
    if parse_qs(parts.query).get("ssl", ["0"])[0].lower() in ("1", "true", "yes"):
        opts.setdefault("ssl", True)
    opts.pop("health_check_interval", None)  # per-node pools are health-checked by the cluster client
    nodes = [ClusterNode(host, port) for host, port in cluster_seeds(url)]
    with redis_errors():  # the client reads the slot map from a seed right away
        return RedisCluster(startup_nodes=nodes, **opts)


def is_cluster(client) -> bool:
    """True for a cluster client (whose multi-key commands must stay within one slot)."""
    return isinstance(client, RedisCluster)


def _safe(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return url.replace(parts.netloc, "***@" + parts.netloc.rsplit("@", 1)[1], 1)
