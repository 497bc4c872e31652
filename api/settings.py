"""Settings of the HTTP API: identity, gunicorn, limits of requests and streams."""

from __future__ import annotations

from dataclasses import dataclass

from tracebus.config import parse_choice, parse_str, setting
from tracebus.trace.settings import TraceSettings


@dataclass(frozen=True)
class ApiSettings(TraceSettings):
    """Tunables of the API. Units are in the names."""

    user_header: str = setting("TRACEBUS_USER_HEADER", "X-User-Id", parse_str,
                               doc="Request header that names the calling user, set by a trusted proxy "
                                   "(honoured only from TRACEBUS_TRUSTED_PROXIES).")
    api_tokens: str = setting("TRACEBUS_API_TOKENS", "", parse_str,
                              doc="Comma-separated token:user pairs; empty: no bearer auth.")
    api_tokens_file: str = setting("TRACEBUS_API_TOKENS_FILE", "", parse_str,
                                   doc="File of token:user lines; empty: none.")
    api_admins: str = setting("TRACEBUS_API_ADMINS", "", parse_str,
                              doc="Comma-separated users who are operators: they may read, requeue and "
                                  "purge dead letters (web monitor, /api/v1/dead-letters); empty: nobody. "
                                  "An anonymous caller is named anon:<address> (e.g. anon:127.0.0.1).")
    api_bind: str = setting("TRACEBUS_API_BIND", "127.0.0.1:8000", parse_str,
                            doc="host:port gunicorn listens on.")
    api_workers: int = setting("TRACEBUS_API_WORKERS", 2, minimum=1,
                               doc="gunicorn worker processes.")
    api_worker_class: str = setting("TRACEBUS_API_WORKER_CLASS", "gevent", parse_choice("gevent", "gthread"),
                                    doc="gunicorn worker class. gevent: one greenlet per connection, so slow or "
                                        "idle clients, streams and SSE cost memory, not threads; gthread: a "
                                        "thread per request being read or served (a client sending its "
                                        "headers slowly holds one; put a buffering proxy in front).")
    api_worker_connections: int = setting("TRACEBUS_API_WORKER_CONNECTIONS", 1000, minimum=1,
                                          doc="gevent: most connections one worker holds at once (open, "
                                              "reading, streaming); more wait in the listen backlog.")
    api_threads: int = setting("TRACEBUS_API_THREADS", 8, minimum=1,
                               doc="gthread: threads per gunicorn worker (each open stream or SSE holds one).")
    api_timeout_s: int = setting("TRACEBUS_API_TIMEOUT_SECONDS", 360, minimum=1,
                                 doc="gunicorn worker timeout (a silent worker is restarted).")
    api_graceful_timeout_s: int = setting("TRACEBUS_API_GRACEFUL_TIMEOUT_SECONDS", 30,
                                          doc="gunicorn graceful shutdown deadline.")
    api_keepalive_s: int = setting("TRACEBUS_API_KEEPALIVE_SECONDS", 5, minimum=1,
                                   doc="HTTP keep-alive idle time; with gevent also the most a client may take "
                                       "to send a request's line and headers (a slower one is disconnected).")
    api_max_requests: int = setting("TRACEBUS_API_MAX_REQUESTS", 5000,
                                    doc="Recycle a gunicorn worker after this many requests, plus up "
                                        "to 10% jitter (0: never).")
    api_access_log: str = setting("TRACEBUS_API_ACCESS_LOG", "", parse_str,
                                  doc="gunicorn access log ('-': stdout; empty: none).")
    metrics_dir: str = setting("TRACEBUS_METRICS_DIR", "", parse_str,
                               doc="Directory where the API's gunicorn workers keep their HTTP metrics for "
                                   "GET /metrics (prometheus-client multiprocess mode; its *.db files "
                                   "are deleted at each start); empty: a private temporary directory, "
                                   "removed when gunicorn exits.")
    api_max_body_bytes: int = setting("TRACEBUS_API_MAX_BODY_BYTES", 32 * 1024 * 1024, minimum=1,
                                      doc="Largest request body accepted (413 above it).")
    api_body_timeout_s: int = setting("TRACEBUS_API_BODY_TIMEOUT_S", 30, minimum=1,
                                      doc="Most seconds a request body may take to arrive; a stalled one is "
                                          "408 and its connection closed.")
    api_sync_threads: int = setting("TRACEBUS_API_SYNC_THREADS", 1, minimum=1,
                                    doc="gevent: threads per API worker that compute the answers made in the "
                                        "request (synchronous trace, seed-resolve, lineage, equipment-period "
                                        "under 30 days, MSD lookups) off the event loop; more such requests "
                                        "wait their turn while the loop serves the others (each thread more "
                                        "competes with the loop for the GIL).")
    api_max_page_rows: int = setting("TRACEBUS_API_MAX_PAGE_ROWS", 50000, minimum=1,
                                     doc="Largest ``limit`` of a result page.")
    api_retry_after_s: int = setting("TRACEBUS_API_RETRY_AFTER_SECONDS", 5, minimum=1,
                                     doc="Retry-After of a 503 when Redis is unreachable.")
    api_max_streams: int = setting("TRACEBUS_API_MAX_STREAMS", 60, minimum=1,
                                   doc="Most streamed bodies (event streams, NDJSON, whole results, exports) "
                                       "one API worker holds open; past it a new one is 503 with Retry-After "
                                       "(below the Redis pool's 100, so other routes keep a connection).")
    api_write_timeout_s: int = setting("TRACEBUS_API_WRITE_TIMEOUT_S", 60, minimum=1,
                                       doc="Most seconds a streamed body's write may wait for a client that "
                                           "does not read; then its connection is dropped.")
    api_max_streams_per_caller: int = setting("TRACEBUS_API_MAX_STREAMS_PER_CALLER", 10, minimum=1,
                                              doc="Most streamed bodies one caller holds open in one API "
                                                  "worker; past it a new one is 429 with Retry-After.")
    api_sse_heartbeat_s: int = setting("TRACEBUS_API_SSE_HEARTBEAT_SECONDS", 15, minimum=1,
                                       doc="Silence after which an event stream sends a comment.")
    api_sse_max_s: int = setting("TRACEBUS_API_SSE_MAX_SECONDS", 600, minimum=1,
                                 doc="An event stream is closed after this long; the client "
                                     "reconnects with Last-Event-ID (frees the thread).")

    # -- API identity and rate limits ----------------------------------------------------------
    trusted_proxies: str = setting("TRACEBUS_TRUSTED_PROXIES", "", parse_str,
                                   doc="Comma-separated addresses or CIDRs of reverse proxies whose "
                                       "TRACEBUS_USER_HEADER and X-Forwarded-For are believed; from any "
                                       "other peer both are ignored (empty: trust no one; the reverse proxy "
                                       "on the same host is 127.0.0.1).")
    proxy_token: str = setting("TRACEBUS_PROXY_TOKEN", "", parse_str,
                               doc="A secret the trusted proxy sends in X-Proxy-Token with every user header "
                                   "(the proxy's proof). Set: a user header without it is 401. Empty: with "
                                   "bearer tokens configured, a user header is 401 (a trusted address alone "
                                   "never names a user there); without tokens the address suffices.")
    api_allowed_hosts: str = setting("TRACEBUS_API_ALLOWED_HOSTS", "", parse_str,
                                     doc="Comma-separated host names the API answers for (the Host header, port "
                                         "ignored; a DNS-rebinding page sends its own); another is 400 "
                                         "INVALID_HOST. Empty or '*': any (tracebus up sets what it binds).")
    rate_limits: str = setting("TRACEBUS_RATE_LIMITS", "", parse_str,
                               doc="Fixed-window rate limits per bucket and caller, as "
                                   "'bucket=max/seconds,...' overriding the defaults (the API's own and those the "
                                   "kinds' routes declare: deploy/tracebus.env lists them; an unknown bucket "
                                   "is refused, naming them); max 0 switches a bucket off, 'off' switches "
                                   "them all off.")
    api_envelope: int = setting("TRACEBUS_API_ENVELOPE", 0, minimum=0,
                                doc="1: wrap every JSON answer as the original dashboard's "
                                    "{success, data, meta} / {success: false, error, meta}; 0: bare.")
    api_dashboard_envelope: int = setting("TRACEBUS_API_DASHBOARD_ENVELOPE", 1, minimum=0,
                                          doc="1: the dashboard's /api/trace/* routes answer in the "
                                              "original's envelope whatever TRACEBUS_API_ENVELOPE says, as "
                                              "its pages read them (payload.data); 0: they follow "
                                              "TRACEBUS_API_ENVELOPE. /api/mid-section-defect/*, /api/job/* "
                                              "and /api/query-tool/* are always enveloped.")
