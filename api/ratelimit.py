"""Rate limits as the original dashboard's (MSD.md section 6): a fixed window per bucket and caller.

Each route belongs to at most one bucket (:func:`route_buckets`, by route template and
method: :data:`ROUTE_BUCKETS`, and the bucket each route a kind declares names). A request counts one hit in Redis key ``<prefix>:rate:<bucket>:<caller>``: the
first hit of a window creates the key with the window as its TTL, every hit increments it,
and a request whose count passes the bucket's maximum is answered 429
``TOO_MANY_REQUESTS`` with ``Retry-After`` = the key's remaining TTL (at least 1 s).
Blocked hits still count, as in the original. The counter lives in Redis, so every API
process (and host) shares it; the key expires with its window. With Redis unreachable the
limit is not checked (the synchronous trace still answers; other routes answer 503).

The caller is ``req.context.user``: a named user, or ``anon:<address>`` for requests
without identity (:mod:`api.identity`), so anonymous clients are limited per address.

Limits come from ``TRACEBUS_RATE_LIMITS`` (``bucket=max/seconds,...`` over
:func:`default_limits`: :data:`DEFAULT_LIMITS` and those the kinds' own routes declare; ``max``
0 turns a bucket off, ``off`` turns them all off). The
``msd-analysis`` bucket is declared for the original's ``/api/mid-section-defect/analysis``,
which tracebus does not serve (the events job computes the analysis, under ``trace-events``):
it limits no route. It stays a name ``TRACEBUS_RATE_LIMITS`` accepts, so that a deployment
whose setting names it (``deploy/tracebus.env`` lists every bucket) still starts, and it stays
the API's: a kind declares a bucket only with a route of its that uses it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import falcon
import redis

from tracebus.engine.redis_errors import redis_errors
from tracebus.engine.errors import BrokerError
from tracebus.errors import ConfigError
from tracebus.jobs.errors import QuotaExceeded
from api.keys import ApiKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``max_hits`` requests per ``window_s`` seconds (``max_hits`` 0: unlimited)."""

    max_hits: int
    window_s: int


#: The original's buckets and limits per 60 s (core/rate_limit.py of the dashboard), but those of
#: the routes a kind declares (their bucket and default are the kind's: :func:`default_limits`).
DEFAULT_LIMITS: dict[str, Limit] = {
    "trace-events": Limit(15, 60),
    "trace-job-status": Limit(60, 60),
    "msd-analysis": Limit(6, 60),  # limits no route (see the module docstring)
    "job-abandon": Limit(30, 60), "job-status": Limit(60, 60),
    # tracebus's own: POST /api/v1/jobs (a job of any declared kind; its in-flight quota does not
    # bind jobs that end within a second), as many as the trace-events bucket.
    "jobs-submit": Limit(15, 60),
}

#: (method, route template) -> bucket. ``trace-job-status`` is shared by a job's status,
#: result, stream and events, as in the original.
ROUTE_BUCKETS: dict[tuple[str, str], str] = {
    ("POST", "/api/trace/events"): "trace-events",
    ("GET", "/api/trace/job/{job_id}"): "trace-job-status",
    ("GET", "/api/trace/job/{job_id}/result"): "trace-job-status",
    ("GET", "/api/trace/job/{job_id}/stream"): "trace-job-status",
    ("GET", "/api/trace/job/{job_id}/events"): "trace-job-status",
    # The generic job contract: abandon as the original's job-abandon bucket; its status and
    # result (unlimited in the original) share a bucket like the trace job's.
    ("GET", "/api/job/{job_id}"): "job-status",
    ("GET", "/api/job/{job_id}/result"): "job-status",
    ("POST", "/api/job/{job_id}/abandon"): "job-abandon",
    ("GET", "/api/v1/jobs/{job_id}/export"): "trace-job-status",
    ("POST", "/api/v1/jobs"): "jobs-submit",
}

def default_limits() -> dict[str, Limit]:
    """:data:`DEFAULT_LIMITS` and the bucket each route a kind declares with its default
    (:func:`tracebus.trace.installed.routes`; a route's bucket may be shared with another's, or be
    one of the API's own when the route gives no default).

    Raises:
        ValueError: a kind's route declares one of :data:`DEFAULT_LIMITS` (two owners of one
            bucket), or names a bucket no one declares.
    """
    from tracebus.trace import installed

    routes = installed.routes()
    declared = {route.bucket: Limit(*route.limit) for route in routes if route.limit is not None}
    taken = sorted(set(declared) & set(DEFAULT_LIMITS))
    if taken:
        raise ValueError(f"a kind's route declares the API's own rate-limit bucket {', '.join(taken)}")
    limits = {**DEFAULT_LIMITS, **declared}
    unknown = sorted({f"{route.path}: {route.bucket}" for route in routes if route.bucket and route.bucket not in limits})
    if unknown:
        raise ValueError(f"a kind's route names a rate-limit bucket no one declares ({'; '.join(unknown)})")
    return limits


def route_buckets() -> dict[tuple[str, str], str]:
    """:data:`ROUTE_BUCKETS` and the bucket of each route a kind declares."""
    from tracebus.trace import installed

    return {**ROUTE_BUCKETS, **{(route.method, route.path): route.bucket for route in installed.routes()
                                if route.bucket}}


#: The original's message (the dashboard shows it as is).
MESSAGE = "請求過於頻繁，請稍後再試 (too many requests; retry later)"


class RateLimited(QuotaExceeded):
    """A caller passed a bucket's limit (429 with ``Retry-After``)."""

    code = "TOO_MANY_REQUESTS"


def parse_limits(spec: str, variable: str = "TRACEBUS_RATE_LIMITS") -> dict[str, Limit]:
    """:func:`default_limits` overridden by ``spec`` (``bucket=max/seconds,...``; ``off``: none).

    Raises:
        ConfigError: an entry not of that form, an unknown bucket, or a window below 1 s.
    """
    defaults = default_limits()
    if spec.strip().lower() == "off":
        return {name: Limit(0, limit.window_s) for name, limit in defaults.items()}
    limits = dict(defaults)
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        name, _, value = entry.partition("=")
        hits, _, window = value.partition("/")
        name = name.strip()
        if name not in defaults:
            raise ConfigError(f"{variable}: unknown bucket {name!r}; buckets: {', '.join(defaults)}")
        try:
            limit = Limit(int(hits), int(window) if window.strip() else defaults[name].window_s)
        except ValueError:
            raise ConfigError(f"{variable}: {entry!r} is not 'bucket=max/seconds'") from None
        if limit.max_hits < 0 or limit.window_s < 1:
            raise ConfigError(f"{variable}: {entry!r} needs max >= 0 and seconds >= 1")
        limits[name] = limit
    return limits


#: Socket timeout of the API's quick client (the rate counters, the outage probe): each call
#: is tiny and either fails open (a count) or only asks (a probe), so on a frozen Redis it
#: must give up long before the route's own call (whose TRACEBUS_REDIS_TIMEOUT_SECONDS makes
#: the 503) rather than add its timeout to the request's.
QUICK_TIMEOUT_S = 0.5


def quick_client(redis_url: str):
    """The rate counters' and the outage probe's client: short timeouts, never retried."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from tracebus.engine.connection import redis_client, topology

    options = {} if topology(redis_url) == "cluster" else {"retry": Retry(NoBackoff(), 0)}
    return redis_client(redis_url, socket_timeout=QUICK_TIMEOUT_S, socket_connect_timeout=QUICK_TIMEOUT_S,
                        **options)


class RateLimiter:
    """Fixed-window counters in Redis.

    Args:
        client(redis.Redis): the API's Redis client.
        keys(ApiKeys): key names (``ApiKeys.rate``).
        limits(dict[str, Limit]): bucket -> limit.
    """

    def __init__(self, client: redis.Redis, keys: ApiKeys, limits: dict[str, Limit]):
        self.client, self.keys, self.limits = client, keys, limits

    def hit(self, bucket: str, caller: str) -> None:
        """Count one request of ``caller`` in ``bucket``.

        Raises:
            RateLimited: the count passed the bucket's maximum in this window (with Redis
                unreachable nothing is counted: the request goes on).
        """
        limit = self.limits.get(bucket)
        if limit is None or limit.max_hits == 0:
            return
        key = self.keys.rate(bucket, caller)
        try:
            with redis_errors():
                pipe = self.client.pipeline(transaction=True)
                # SET NX EX gives the window its expiry on the first hit; INCR keeps it.
                pipe.set(key, 0, ex=limit.window_s, nx=True)
                pipe.incr(key)
                pipe.ttl(key)
                _, count, ttl = pipe.execute()
        except BrokerError as e:
            # Fail open: the synchronous trace needs no Redis and must still answer; the
            # routes that need Redis answer 503 by themselves.
            log.debug("rate limit %s not checked: %s", bucket, e)
            return
        if count > limit.max_hits:
            retry_after_s = max(1, int(ttl))
            raise RateLimited(f"{MESSAGE}: {bucket} allows {limit.max_hits} requests per "
                              f"{limit.window_s} s", retry_after_s=retry_after_s,
                              bucket=bucket, retry_after_seconds=retry_after_s)


class RateLimits:
    """Falcon middleware applying :func:`route_buckets` (after :class:`api.identity.Identity`).

    Args:
        limiter(RateLimiter): the counters.
        buckets(dict[tuple[str, str], str]): (method, route template) -> bucket.
    """

    def __init__(self, limiter: RateLimiter, buckets: dict[tuple[str, str], str] | None = None):
        self.limiter = limiter
        self.buckets = route_buckets() if buckets is None else buckets

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource, params) -> None:
        bucket = self.buckets.get((req.method, req.uri_template or ""))
        caller = getattr(req.context, "user", None)
        if bucket is not None and caller is not None:
            self.limiter.hit(bucket, caller)
