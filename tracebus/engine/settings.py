"""Settings of the queue engine: Redis, the queue, the supervisor and its workers, logs.

Declared with :func:`tracebus.config.setting`; every layer above derives its settings from
:class:`Settings`, so one object carries a process's whole configuration while each layer
reads only its own fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracebus.config import EnvSettings, parse_choice, parse_str, setting


@dataclass(frozen=True)
class Settings(EnvSettings):
    """Every tunable of the engine. Units are in the names."""

    # -- Redis and the queue -------------------------------------------------------------------
    redis_url: str = setting("REDIS_URL", "redis://127.0.0.1:6379/0", parse_str,
                             doc="Redis holding queues, job state and results.")
    key_prefix: str = setting("TRACEBUS_KEY_PREFIX", "tracebus", parse_str,
                              doc="Prefix of every Redis key tracebus writes.")
    redis_wait_replicas: int = setting("TRACEBUS_REDIS_WAIT_REPLICAS", 0,
                                       doc="Replicas that must acknowledge job creation and unit "
                                           "completion (Redis WAIT) before they count; 0: no wait.")
    redis_wait_timeout_ms: int = setting("TRACEBUS_REDIS_WAIT_TIMEOUT_MS", 1000, minimum=1,
                                         doc="How long such a write waits for its replicas before it "
                                             "fails as 'Redis is moving' (the unit is redone).")
    worker_count: int = setting("TRACE_WORKER_COUNT", 2, minimum=1,
                                doc="Worker processes forked by the supervisor.")
    max_deliveries: int = setting("TRACEBUS_MAX_DELIVERIES", 5, minimum=1,
                                  doc="Deliveries of one message before it is dead-lettered.")
    claim_min_idle_ms: int = setting("TRACEBUS_CLAIM_MIN_IDLE_MS", 3000, minimum=100,
                                     doc="Lease of a delivered entry: a worker renews its leases every "
                                         "quarter of this from its own process; an entry idle this long "
                                         "(its worker or host dead or frozen) is requeued by any host's "
                                         "janitor, which looks every third of it.")
    redis_timeout_s: int = setting("TRACEBUS_REDIS_TIMEOUT_SECONDS", 4, minimum=1,
                                   doc="Socket timeout of every Redis call (connect and reply; a "
                                       "blocking read gets its BLOCK time on top): a frozen Redis "
                                       "is an error after this long, never retried.")
    block_ms: int = setting("TRACEBUS_BLOCK_MS", 1000, minimum=1,
                            doc="XREADGROUP BLOCK time; also the worker's idle heartbeat period.")
    prefetch: int = setting("TRACEBUS_PREFETCH", 64, minimum=1,
                            doc="Upper bound of entries one worker reads per XREADGROUP.")
    dead_maxlen: int = setting("TRACEBUS_DEAD_MAXLEN", 10000, minimum=1,
                               doc="Approximate cap of the dead-letter stream.")
    dead_ttl_s: int = setting("TRACEBUS_DEAD_TTL_SECONDS", 7 * 86400, minimum=1,
                              doc="Dead-letter streams expire this long after their last write.")
    result_ttl_s: int = setting("TRACEBUS_RESULT_TTL_SECONDS", 3600, minimum=1,
                                doc="Stored results of actors with store_results=True expire after "
                                    "this long (an actor's result_ttl_ms overrides it).")
    schedule_file: str = setting("TRACEBUS_SCHEDULE_FILE", "", parse_str,
                                 doc="Periodic messages: lines 'CRON ACTOR [JSON args]' (UTC) that "
                                     "every worker supervisor sends once per tick between them all.")

    # -- supervisor ----------------------------------------------------------------------------
    heartbeat_timeout_s: int = setting("TRACEBUS_HEARTBEAT_TIMEOUT_SECONDS", 60, minimum=1,
                                       doc="A child silent this long is aborted, then killed.")
    graceful_timeout_s: int = setting("TRACEBUS_GRACEFUL_TIMEOUT_SECONDS", 60, minimum=0,
                                      doc="Drain deadline on SIGTERM before children are killed.")
    hard_time_limit_grace_s: int = setting("TRACEBUS_HARD_TIME_LIMIT_GRACE_SECONDS", 5, minimum=0,
                                           doc="A message past its actor's time limit (time_limit_ms) "
                                               "that the soft limit did not stop (a C call that never "
                                               "returns) gets its worker SIGKILLed this long after 1.1x "
                                               "the limit.")
    max_jobs: int = setting("TRACEBUS_WORKER_MAX_JOBS", 0,
                            doc="Recycle a child after this many messages (0: never).")
    max_rss_mb: int = setting("TRACEBUS_WORKER_MAX_RSS_MB", 384, minimum=0,
                              doc="Recycle a child whose RSS passes this between messages (0: never). "
                                  "On by default: a unit that leaves its worker fat (a large request's "
                                  "params, a leaking driver) is not carried into every later unit; the "
                                  "114K-CID trace peaks at 83 MB and the MSD job at 105 MB (200 MB "
                                  "with columnar copies), well under it.")
    worker_nice: int = setting("TRACEBUS_WORKER_NICE", 10, minimum=0,
                               doc="Niceness added to worker processes, so that on a shared host "
                                   "background units yield the CPU to the API (0: none).")

    notify_socket: str = setting("NOTIFY_SOCKET", "", parse_str,
                                 doc="Set by systemd for Type=notify units; READY=1 is sent there.")

    middleware: str = setting("TRACEBUS_MIDDLEWARE", "", parse_str,
                              doc="Comma-separated module:Class middleware every worker installs, "
                                  "besides those of the command line and the defaults.")

    # -- logging -------------------------------------------------------------------------------
    log_format: str = setting("TRACEBUS_LOG_FORMAT", "text", parse_choice("text", "json"))
    log_level: str = setting("TRACEBUS_LOG_LEVEL", "info", parse_choice("debug", "info", "warning", "error"))
