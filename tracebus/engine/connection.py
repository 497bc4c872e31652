"""The one place a Redis client is made: the topology is chosen by the URL's scheme.

* ``redis://``, ``rediss://``, ``unix://``: one node (redis-py's own ``from_url``).
* ``redis+sentinel://[user:password@]host:port[,host:port...]/master[/db][?options]``:
  redis-py's :class:`~redis.sentinel.Sentinel` asks the sentinels for the master of
  ``master`` and its connections follow a failover by themselves: a client asks the
  sentinels again at most every :data:`FOLLOW_EVERY_S` as it sends, and leaves a primary they
  no longer name (a demoted primary's READONLY, which Sentinel only brings some 8 s after a
  promotion, would be too late: the old primary's writes meanwhile are lost). The password in the URL is the data nodes'; the
  sentinels' is ``?sentinel_password=``. ``rediss+sentinel://`` speaks TLS to the data nodes.
* ``redis+cluster://host:port[,host:port...]``: Redis Cluster (plugs in at
  :func:`_cluster_client`).

Every other module asks :func:`redis_client` for a client, so a topology is added here and
nowhere else. A malformed URL is one :class:`~tracebus.errors.ConfigError` line.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.connection import SSLConnection
from redis.sentinel import Sentinel, SentinelManagedConnection

from tracebus.errors import ConfigError

SINGLE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
#: Default port of a sentinel, when a host of a sentinel URL names none.
SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL."""

    hosts: list[tuple[str, int]]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    ssl: bool = False
    options: dict[str, str] = field(default_factory=dict)


def topology(url: str) -> str:
    """``"single"``, ``"sentinel"`` or ``"cluster"`` for ``url``.

    Raises:
        ConfigError: the scheme is none of those tracebus knows.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in SINGLE_SCHEMES:
        return "single"
    if scheme in SENTINEL_SCHEMES:
        return "sentinel"
    if scheme in CLUSTER_SCHEMES:
        return "cluster"
    raise ConfigError(f"REDIS_URL {redact(url)!r} must start with redis://, rediss://, unix://, "
                      f"redis+sentinel:// or redis+cluster://")


def parse_hosts(netloc: str, default_port: int, url: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (IPv6 in brackets) as a list of (host, port)."""
    hosts = []
    for part in netloc.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("["):
            host, _, rest = part[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = part.rpartition(":") if ":" in part else (part, "", "")
        try:
            port = int(port_text) if port_text else default_port
        except ValueError:
            raise ConfigError(f"REDIS_URL {redact(url)!r}: bad port in {part!r}") from None
        if not host or not 0 < port < 65536:
            raise ConfigError(f"REDIS_URL {redact(url)!r}: bad host:port {part!r}")
        hosts.append((host, port))
    if not hosts:
        raise ConfigError(f"REDIS_URL {redact(url)!r} names no host")
    return hosts


def parse_sentinel_url(url: str) -> SentinelUrl:
    """Parse ``redis+sentinel://[user:password@]h:p,h:p/master[/db][?sentinel_password=...]``.

    Raises:
        ConfigError: no host, no master name, or a db that is not a number.
    """
    parts = urlsplit(url)
    userinfo, _, netloc = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    hosts = parse_hosts(netloc, SENTINEL_PORT, url)
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ConfigError(f"REDIS_URL {redact(url)!r} must name the master: "
                          f"redis+sentinel://host:port[,host:port]/MASTER[/DB]")
    db = 0
    if len(path) == 2:
        if not path[1].isdigit():
            raise ConfigError(f"REDIS_URL {redact(url)!r}: the db must be a number, got {path[1]!r}")
        db = int(path[1])
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return SentinelUrl(hosts=hosts, master=unquote(path[0]), db=db,
                       username=unquote(username) or None, password=unquote(password) or None,
                       sentinel_password=options.pop("sentinel_password", None),
                       ssl=parts.scheme.lower().startswith("rediss"), options=options)


def redis_client(url: str, **options) -> redis.Redis:
    """A client of the Redis at ``url``, whatever its topology.

    Args:
        url(str): ``REDIS_URL`` (see the module's docstring for the schemes).
        **options: redis-py connection options (``socket_timeout``, ``socket_connect_timeout``,
            ``health_check_interval``...), given to the data nodes' connections; and
            ``strict_primary=True``: after a failover, each connection fails once instead of
            moving to the new primary silently (:class:`PrimaryConnection`; the workers').

    Raises:
        ConfigError: the URL is malformed or of an unknown scheme.
    """
    kind = topology(url)
    strict = options.pop("strict_primary", False)
    if kind == "sentinel":
        return _sentinel_client(parse_sentinel_url(url), strict, **options)
    if kind == "cluster":
        return _cluster_client(url, **options)
    try:
        _check_single_url(url)
        return redis.Redis.from_url(url, **options)
    except ValueError as e:  # redis-py's message for a bad db, port or option
        raise ConfigError(f"REDIS_URL {redact(url)!r} is invalid: {e}") from None


def _check_single_url(url: str) -> None:
    """What redis-py lets pass silently: a db that is not a number (it uses 0), a bad port."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "unix":
        return
    parts.port  # noqa: B018 -- raises ValueError for a port that is not a number or out of range
    if not parts.hostname:
        raise ValueError("no host")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"the db must be a number, got {db!r}")


#: Seconds between two questions of one client to the sentinels: which node is the primary now.
#: After ``SENTINEL FAILOVER`` the old primary goes on accepting writes until Sentinel demotes it
#: (``+convert-to-slave``, some 8 s later: four of its publish periods), and every write it takes
#: meanwhile is discarded when it resyncs from the new one. A client that only learns of the
#: move from the demotion (its connections killed, READONLY) works on a lost copy all along;
#: one that asks this often leaves the old primary within about this time.
FOLLOW_EVERY_S = 0.5


def _named_primary(conn) -> tuple | None:
    """The primary the sentinels name now, asked at most every :data:`FOLLOW_EVERY_S` per client
    (the time is shared by every connection of the client); None when not asked, or when no
    sentinel answered (the command then finds out for itself)."""
    pool = conn.connection_pool
    now = time.monotonic()
    if now < getattr(pool, "tracebus_asked_at", float("-inf")) + FOLLOW_EVERY_S:
        return None
    pool.tracebus_asked_at = now
    try:
        # redis-py's pool, seeing a new address, also drops its idle connections to the old one.
        return tuple(pool.get_master_address())
    except (redis.RedisError, OSError):
        return None


class FollowingConnection(SentinelManagedConnection):
    """A (non-strict) Sentinel connection that leaves a primary the sentinels no longer name
    within :data:`FOLLOW_EVERY_S`, instead of when that node is demoted: it reconnects before
    its next command (nothing is in flight on it then)."""

    def send_packed_command(self, command, check_health=True):
        if self._sock is not None:
            named = _named_primary(self)
            if named is not None and named != (self.host, self.port):
                self.disconnect()
        return super().send_packed_command(command, check_health)


class FollowingSSLConnection(FollowingConnection, SSLConnection):
    """:class:`FollowingConnection` over TLS (``rediss+sentinel://``)."""


class PrimaryMoved(redis.ConnectionError):
    """A strict connection refused to go on with a new primary (see :class:`PrimaryConnection`):
    never to be retried as a plain reconnect, which is what it exists to prevent."""


class PrimaryConnection(SentinelManagedConnection):
    """A connection to the Sentinel master that never moves to a new primary silently.

    redis-py reconnects an idle connection to the new primary after a failover without a
    word. A unit of work whose first writes went to the old primary (and were lost with it)
    would then finish on the new one, half written. Instead, the first connect of this
    connection to a primary other than the one it last used fails once with a
    ConnectionError ("Redis is moving"), so the work in progress is redone from the start.
    And once one connection of the client has seen the new primary, every other one still
    connected to the old primary fails its next command the same way (the worker's producer
    and reader sockets are apart from the pool: a unit's messages must not go to the old
    primary while its state goes to the new one).
    """

    _last_primary: tuple | None = None

    def _connect_retry(self):
        if self._sock:
            return
        address = self.connection_pool.get_master_address()
        # A connection's first connect compares with what the client's others last knew: the
        # pool may open a new one in the middle of a unit (another thread holds the first).
        last = self._last_primary or getattr(self.connection_pool, "tracebus_primary", None)
        self._last_primary = address
        self.connection_pool.tracebus_primary = address  # shared by every connection of the client
        if last is not None and last != address:
            raise PrimaryMoved(f"the primary moved from {last[0]}:{last[1]} to {address[0]}:{address[1]}")
        self.connect_to(address)

    def send_packed_command(self, command, check_health=True):
        if self._sock is not None:
            named = _named_primary(self)  # a promotion is seen within FOLLOW_EVERY_S, not at the demotion
            if named is not None:
                self.connection_pool.tracebus_primary = named
        known = getattr(self.connection_pool, "tracebus_primary", None)
        if self._sock is not None and known is not None and known != self._last_primary:
            last = self._last_primary
            self.disconnect()
            self._last_primary = known
            raise PrimaryMoved(f"the primary moved from {last[0]}:{last[1]} to {known[0]}:{known[1]}")
        return super().send_packed_command(command, check_health)


class PrimarySSLConnection(PrimaryConnection, SSLConnection):
    """:class:`PrimaryConnection` over TLS (``rediss+sentinel://``)."""


def _sentinel_client(parsed: SentinelUrl, strict: bool, **options) -> redis.Redis:
    # The sentinels answer fast or not at all: a short timeout lets a dead one be skipped.
    probe_timeout = min(float(options.get("socket_connect_timeout") or 2), 2.0)
    sentinel_kwargs = {"socket_timeout": probe_timeout, "socket_connect_timeout": probe_timeout}
    if parsed.sentinel_password:
        sentinel_kwargs["password"] = parsed.sentinel_password
    node = dict(options)
    if parsed.username:
        node["username"] = parsed.username
    if parsed.password:
        node["password"] = parsed.password
    if strict:
        node["connection_class"] = PrimarySSLConnection if parsed.ssl else PrimaryConnection
    else:
        node["connection_class"] = FollowingSSLConnection if parsed.ssl else FollowingConnection
    sentinel = Sentinel(parsed.hosts, sentinel_kwargs=sentinel_kwargs)
    return sentinel.master_for(parsed.master, db=parsed.db, **node)


def _cluster_client(url: str, **options) -> redis.Redis:
    """Redis Cluster: :func:`tracebus.engine.cluster_client.cluster_client` (redis-py's
    ``RedisCluster`` from the seed nodes; ``rediss+cluster://`` speaks TLS)."""
    from tracebus.engine.cluster_client import cluster_client

    if url.split("://", 1)[0].lower() == "rediss+cluster":
        options.setdefault("ssl", True)
        url = "redis+cluster://" + url.split("://", 1)[1]
    if options.get("retry", False) is None:
        options.pop("retry")  # RedisCluster's own default (a cluster retries MOVED/ASK itself)
    return cluster_client(url, **options)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (URLs end up in logs and errors): the
    userinfo's, and a ``password=`` or ``sentinel_password=`` query option's."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest = _PASSWORD_OPTION.sub(r"\1***", rest)
    userinfo, at, hostpart = rest.partition("@")
    if not at or "/" in userinfo:
        return f"{scheme}://{rest}"
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{hostpart}"


#: A password given as a URL query option (``?password=``, ``&sentinel_password=``).
_PASSWORD_OPTION = re.compile(r"([?&](?:sentinel_)?password=)[^&#]*", re.IGNORECASE)


def reachable(url: str, timeout_s: float = 1.0) -> bool:
    """True when the Redis at ``url`` (any topology) answers PING within about ``timeout_s``.

    Raises:
        ConfigError: the URL is malformed.
        BrokerConnectionError: it answers, and refuses the URL's password ("authentication failed").
    """
    from tracebus.engine.redis_errors import redis_errors

    client = redis_client(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                          retry=None)
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        with redis_errors():  # said as what it is, not as a Redis that does not answer
            raise
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()
