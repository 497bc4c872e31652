"""All configuration, read from the environment in one place.

:class:`Settings` is a frozen dataclass; :meth:`Settings.from_env` is the only code in
tracebus that reads ``os.environ``. Every field documents its variable, unit and
default; values are validated eagerly and a bad one raises :class:`ConfigError`
naming the variable and the value. Constructors take a ``Settings`` (or the values
they need) as arguments; nothing reads a global.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .errors import ConfigError


def _int(name: str, raw: str, minimum: int | None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def _str(name: str, raw: str, minimum: int | None) -> str:
    return raw


def _choice(*choices: str) -> Callable[[str, str, int | None], str]:
    def parse(name: str, raw: str, minimum: int | None) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return value

    return parse


def _setting(env: str, default, parse=_int, minimum: int | None = 0, doc: str = ""):
    """Declare a field together with its environment variable (gunicorn's one-declaration idea)."""
    return field(default=default, metadata={"env": env, "parse": parse, "minimum": minimum, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Every tunable of tracebus. Units are in the names."""

    # -- Redis and the queue -------------------------------------------------------------------
    redis_url: str = _setting("REDIS_URL", "redis://127.0.0.1:6379/0", _str,
                              doc="Redis holding queues, job state and results.")
    key_prefix: str = _setting("TRACEBUS_KEY_PREFIX", "tracebus", _str,
                               doc="Prefix of every Redis key tracebus writes.")
    queue: str = _setting("TRACE_WORKER_QUEUE", "trace-events", _str,
                          doc="Queue that trace-event units are sent to.")
    worker_count: int = _setting("TRACE_WORKER_COUNT", 2, minimum=1,
                                 doc="Worker processes forked by the supervisor.")
    max_deliveries: int = _setting("TRACEBUS_MAX_DELIVERIES", 5, minimum=1,
                                   doc="Deliveries of one message before it is dead-lettered.")
    claim_min_idle_ms: int = _setting("TRACEBUS_CLAIM_MIN_IDLE_MS", 30000, minimum=100,
                                      doc="Idle time after which another host may XAUTOCLAIM an entry.")
    block_ms: int = _setting("TRACEBUS_BLOCK_MS", 1000, minimum=1,
                             doc="XREADGROUP BLOCK time; also the worker's idle heartbeat period.")
    prefetch: int = _setting("TRACEBUS_PREFETCH", 64, minimum=1,
                             doc="Upper bound of entries one worker reads per XREADGROUP.")
    dead_maxlen: int = _setting("TRACEBUS_DEAD_MAXLEN", 10000, minimum=1,
                                doc="Approximate cap of the dead-letter stream.")
    dead_ttl_s: int = _setting("TRACEBUS_DEAD_TTL_SECONDS", 7 * 86400, minimum=1,
                               doc="Dead-letter streams expire this long after their last write.")

    # -- supervisor ----------------------------------------------------------------------------
    heartbeat_timeout_s: int = _setting("TRACEBUS_HEARTBEAT_TIMEOUT_SECONDS", 60, minimum=1,
                                        doc="A child silent this long is aborted, then killed.")
    graceful_timeout_s: int = _setting("TRACEBUS_GRACEFUL_TIMEOUT_SECONDS", 60, minimum=0,
                                       doc="Drain deadline on SIGTERM before children are killed.")
    max_jobs: int = _setting("TRACEBUS_WORKER_MAX_JOBS", 0,
                             doc="Recycle a child after this many messages (0: never).")
    max_rss_mb: int = _setting("TRACEBUS_WORKER_MAX_RSS_MB", 0,
                               doc="Recycle a child whose RSS passes this between messages (0: never).")
    worker_nice: int = _setting("TRACEBUS_WORKER_NICE", 10, minimum=0,
                                doc="Niceness added to worker processes, so that on a shared host "
                                    "background units yield the CPU to the API (0: none).")

    notify_socket: str = _setting("NOTIFY_SOCKET", "", _str,
                                  doc="Set by systemd for Type=notify units; READY=1 is sent there.")

    # -- trace jobs (names from the original dashboard) ----------------------------------------
    async_cid_threshold: int = _setting("TRACE_ASYNC_CID_THRESHOLD", 20000,
                                        doc="At or below: answered synchronously; above: a job.")
    events_cid_limit: int = _setting("TRACE_EVENTS_CID_LIMIT", 200000, minimum=1,
                                     doc="Hard cap of CIDs per request (413 above it).")
    job_ttl_s: int = _setting("TRACE_JOB_TTL_SECONDS", 3600, minimum=1,
                              doc="Every key of a job expires this long after its last write.")
    job_timeout_s: int = _setting("TRACE_JOB_TIMEOUT_SECONDS", 1800, minimum=1,
                                  doc="Time limit of one job.")
    chunk_cids: int = _setting("TRACE_CHUNK_CIDS", 1000, minimum=1,
                               doc="CIDs per unit of work (one unit = one domain x one CID chunk).")
    job_max_inflight_units: int = _setting("TRACE_JOB_MAX_INFLIGHT_UNITS", 2, minimum=1,
                                           doc="Units of one job queued or running at once.")
    user_max_inflight: int = _setting("TRACE_USER_MAX_INFLIGHT", 5, minimum=1,
                                      doc="Queued or running jobs per user (429 above it).")
    stream_batch_rows: int = _setting("TRACE_STREAM_BATCH_SIZE", 5000, minimum=1,
                                      doc="Rows per stored result chunk.")
    fetchmany_rows: int = _setting("TRACE_FETCHMANY_SIZE", 5000, minimum=1,
                                   doc="Rows per cursor.fetchmany() batch.")

    # -- sources -------------------------------------------------------------------------------
    source: str = _setting("TRACEBUS_SOURCE", "sqlite", _choice("sqlite", "oracle"),
                           doc="Event source: the embedded SQLite sample or Oracle.")
    sqlite_path: str = _setting("TRACEBUS_SQLITE_PATH", "var/sample.db", _str,
                                doc="Path of the embedded SQLite database.")
    oracle_dsn: str = _setting("TRACEBUS_ORACLE_DSN", "", _str,
                               doc="Oracle DSN (host:port/service); empty: no Oracle.")
    oracle_user: str = _setting("TRACEBUS_ORACLE_USER", "", _str)
    oracle_password: str = _setting("TRACEBUS_ORACLE_PASSWORD", "", _str)
    oracle_call_timeout_ms: int = _setting("TRACEBUS_ORACLE_CALL_TIMEOUT_MS", 60000,
                                           doc="oracledb call_timeout per round trip.")

    # -- API -------------------------------------------------------------------------------------
    user_header: str = _setting("TRACEBUS_USER_HEADER", "X-User-Id", _str,
                                doc="Request header that names the calling user, set by a trusted proxy "
                                    "(honoured only from TRACEBUS_TRUSTED_PROXIES).")
    api_tokens: str = _setting("TRACEBUS_API_TOKENS", "", _str,
                               doc="Comma-separated token:user pairs; empty: no bearer auth.")
    api_tokens_file: str = _setting("TRACEBUS_API_TOKENS_FILE", "", _str,
                                    doc="File of token:user lines; empty: none.")
    api_bind: str = _setting("TRACEBUS_API_BIND", "127.0.0.1:8000", _str,
                             doc="host:port gunicorn listens on.")
    api_workers: int = _setting("TRACEBUS_API_WORKERS", 2, minimum=1,
                                doc="gunicorn worker processes.")
    api_threads: int = _setting("TRACEBUS_API_THREADS", 8, minimum=1,
                                doc="Threads per gunicorn worker (each open stream or SSE holds one).")
    api_timeout_s: int = _setting("TRACEBUS_API_TIMEOUT_SECONDS", 360, minimum=1,
                                  doc="gunicorn worker timeout (a silent worker is restarted).")
    api_graceful_timeout_s: int = _setting("TRACEBUS_API_GRACEFUL_TIMEOUT_SECONDS", 30,
                                           doc="gunicorn graceful shutdown deadline.")
    api_keepalive_s: int = _setting("TRACEBUS_API_KEEPALIVE_SECONDS", 5,
                                    doc="HTTP keep-alive idle time.")
    api_max_requests: int = _setting("TRACEBUS_API_MAX_REQUESTS", 5000,
                                     doc="Recycle a gunicorn worker after this many requests, plus up "
                                         "to 10% jitter (0: never).")
    api_access_log: str = _setting("TRACEBUS_API_ACCESS_LOG", "", _str,
                                   doc="gunicorn access log ('-': stdout; empty: none).")
    metrics_dir: str = _setting("TRACEBUS_METRICS_DIR", "", _str,
                                doc="Directory where the API's gunicorn workers keep their HTTP metrics for "
                                    "GET /metrics (prometheus-client multiprocess mode; its *.db files "
                                    "are deleted at each start); empty: a private temporary directory, "
                                    "removed when gunicorn exits.")
    api_max_body_bytes: int = _setting("TRACEBUS_API_MAX_BODY_BYTES", 32 * 1024 * 1024, minimum=1,
                                       doc="Largest request body accepted (413 above it).")
    api_max_page_rows: int = _setting("TRACEBUS_API_MAX_PAGE_ROWS", 50000, minimum=1,
                                      doc="Largest ``limit`` of a result page.")
    api_retry_after_s: int = _setting("TRACEBUS_API_RETRY_AFTER_SECONDS", 5, minimum=1,
                                      doc="Retry-After of a 503 when Redis is unreachable.")
    api_sse_heartbeat_s: int = _setting("TRACEBUS_API_SSE_HEARTBEAT_SECONDS", 15, minimum=1,
                                        doc="Silence after which an event stream sends a comment.")
    api_sse_max_s: int = _setting("TRACEBUS_API_SSE_MAX_SECONDS", 600, minimum=1,
                                  doc="An event stream is closed after this long; the client "
                                      "reconnects with Last-Event-ID (frees the thread).")

    # -- API identity and rate limits ----------------------------------------------------------
    trusted_proxies: str = _setting("TRACEBUS_TRUSTED_PROXIES", "", _str,
                                    doc="Comma-separated addresses or CIDRs of reverse proxies whose "
                                        "TRACEBUS_USER_HEADER and X-Forwarded-For are believed; from any "
                                        "other peer both are ignored (empty: trust no one; the reverse proxy "
                                        "on the same host is 127.0.0.1).")
    rate_limits: str = _setting("TRACEBUS_RATE_LIMITS", "", _str,
                                doc="Fixed-window rate limits per bucket and caller, as "
                                    "'bucket=max/seconds,...' overriding the defaults (trace-seed=10/60, "
                                    "trace-lineage=10/60, trace-events=15/60, trace-job-status=60/60, "
                                    "msd-analysis=6/60, msd-detail=15/60, msd-export=3/60); max 0 "
                                    "switches a bucket off, 'off' switches them all off.")
    api_envelope: int = _setting("TRACEBUS_API_ENVELOPE", 0, minimum=0,
                                 doc="1: wrap every JSON answer as the original dashboard's "
                                     "{success, data, meta} / {success: false, error, meta}; 0: bare.")

    # -- logging -------------------------------------------------------------------------------
    log_format: str = _setting("TRACEBUS_LOG_FORMAT", "text", _choice("text", "json"))
    log_level: str = _setting("TRACEBUS_LOG_LEVEL", "info", _choice("debug", "info", "warning", "error"))

    @classmethod
    def is_set(cls, variable: str, environ: Mapping[str, str] | None = None) -> bool:
        """True when ``variable`` is set to a non-empty value (as opposed to defaulted)."""
        environ = os.environ if environ is None else environ
        return bool(environ.get(variable))

    @classmethod
    def child_environ(cls, overrides: Mapping[str, str],
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a child process: this one's, with ``overrides`` applied."""
        environ = os.environ if environ is None else environ
        return {**environ, **overrides}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "Settings":
        """Build settings from environment variables.

        Args:
            environ: the mapping to read (``os.environ`` when None).
            **overrides: field values that win over the environment (CLI flags).

        Raises:
            ConfigError: a variable holds a value of the wrong type or range.
        """
        environ = os.environ if environ is None else environ
        values = {}
        for f in dataclasses.fields(cls):
            env = f.metadata["env"]
            raw = environ.get(env)
            if raw is not None and raw != "":
                values[f.name] = f.metadata["parse"](env, raw, f.metadata["minimum"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def replace(self, **changes) -> "Settings":
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def documented(cls) -> list[tuple[str, object, str]]:
        """(variable, default, description) of every setting, for docs and deploy/."""
        return [(f.metadata["env"], f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]
