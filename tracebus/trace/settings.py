"""Settings of the trace application: its queue, request limits, units and sources."""

from __future__ import annotations

from dataclasses import dataclass

from tracebus.config import parse_choice, parse_str, setting
from tracebus.jobs.settings import JobSettings


@dataclass(frozen=True)
class TraceSettings(JobSettings):
    """Tunables of trace jobs and their event sources. Units are in the names."""

    queue: str = setting("TRACE_WORKER_QUEUE", "trace-events", parse_str,
                         doc="Queue that trace-event units are sent to.")
    submit_no_worker_repeat_s: int = setting("TRACE_SUBMIT_NO_WORKER_REPEAT_SECONDS", 10, minimum=1,
                                             doc="tracebus submit --wait: how often it says again that "
                                                 "no worker serves the queue while none does.")

    async_cid_threshold: int = setting("TRACE_ASYNC_CID_THRESHOLD", 20000,
                                       doc="At or below: answered synchronously; above: a job. "
                                           "Also the seeds above which POST /api/trace/lineage is a job.")
    seed_async_days: int = setting("TRACE_SEED_ASYNC_DAYS", 10, minimum=0,
                                   doc="Date-mode seed-resolve over a range longer than this many days "
                                       "runs as a job (the original's BATCH_QUERY_TIME_THRESHOLD_DAYS).")
    events_cid_limit: int = setting("TRACE_EVENTS_CID_LIMIT", 200000, minimum=1,
                                    doc="Hard cap of CIDs per request (413 above it).")
    chunk_cids: int = setting("TRACE_CHUNK_CIDS", 1000, minimum=1,
                              doc="CIDs per unit of work (one unit = one domain x one CID chunk).")
    fetchmany_rows: int = setting("TRACE_FETCHMANY_SIZE", 5000, minimum=1,
                                  doc="Rows per cursor.fetchmany() batch.")

    # -- what one request may cost ---------------------------------------------------------------
    query_max_units: int = setting("TRACE_QUERY_MAX_UNITS", 100, minimum=1,
                                   doc="Most units of one query-kind job (date windows x ID lists of 1,000); "
                                       "a request costing more is 413.")
    query_max_binds: int = setting("TRACE_QUERY_MAX_BINDS", 3000, minimum=3,
                                   doc="Most values bound in one statement of a query kind (its IDs, or one "
                                       "list of them, and its narrowing values); more is 413.")
    query_max_params_bytes: int = setting("TRACE_QUERY_MAX_PARAMS_BYTES", 256 * 1024, minimum=1024,
                                          doc="Largest checked parameters of a query-kind job, as the JSON "
                                              "stored with it; larger is 413.")
    query_sync_max_units: int = setting("TRACE_QUERY_SYNC_MAX_UNITS", 3, minimum=0,
                                        doc="A query-kind request under its kind's async days that costs more "
                                            "units than this runs as a job (202) rather than in the API.")
    seed_sync_max_values: int = setting("TRACE_SEED_SYNC_MAX_VALUES", 1000, minimum=0,
                                        doc="Container-mode seed-resolve with more values runs as a job (202).")
    seed_sync_max_patterns: int = setting("TRACE_SEED_SYNC_MAX_PATTERNS", 0, minimum=0,
                                          doc="A serial_number seed-resolve with more values with a wildcard "
                                              "(each a full scan of the containers) runs as a job (0: any).")
    serial_max_patterns: int = setting("TRACE_SERIAL_MAX_PATTERNS", 100, minimum=1,
                                       doc="Most serial_number values with a wildcard (%, _ or *) in one "
                                           "seed-resolve (each is matched against every row); more is 400.")


    # -- sources -------------------------------------------------------------------------------
    source: str = setting("TRACEBUS_SOURCE", "sqlite", parse_choice("sqlite", "oracle", "postgres"),
                          doc="Event source: the embedded SQLite sample, Oracle or PostgreSQL.")
    sqlite_path: str = setting("TRACEBUS_SQLITE_PATH", "var/sample.db", parse_str,
                               doc="Path of the embedded SQLite database.")
    postgres_dsn: str = setting("TRACEBUS_POSTGRES_DSN", "", parse_str,
                                doc="PostgreSQL libpq URL (postgresql://user:password@host:port/db); "
                                    "empty: no PostgreSQL (tracebus up --source postgres starts its own).")
    oracle_dsn: str = setting("TRACEBUS_ORACLE_DSN", "", parse_str,
                              doc="Oracle DSN (host:port/service); empty: no Oracle.")
    oracle_user: str = setting("TRACEBUS_ORACLE_USER", "", parse_str)
    oracle_password: str = setting("TRACEBUS_ORACLE_PASSWORD", "", parse_str)
    oracle_call_timeout_ms: int = setting("TRACEBUS_ORACLE_CALL_TIMEOUT_MS", 60000,
                                          doc="oracledb call_timeout per round trip (when "
                                              "TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S is 0).")
    source_max_sessions: int = setting("TRACEBUS_SOURCE_MAX_SESSIONS", 8, minimum=1,
                                       doc="Sessions the workers of every host sharing the Redis use "
                                           "against the source at once; a unit past it waits, holding none.")
    source_statement_timeout_s: int = setting("TRACEBUS_SOURCE_STATEMENT_TIMEOUT_S", 0, minimum=0,
                                              doc="Server-side limit of one statement (PostgreSQL "
                                                  "statement_timeout, Oracle call_timeout); a statement "
                                                  "past it fails its unit once. 0: none.")
    source_dead_peer_s: int = setting("TRACEBUS_SOURCE_DEAD_PEER_S", 30, minimum=1,
                                      doc="A source connection silent this long (TCP keepalives, "
                                          "tcp_user_timeout) is dead: its unit fails over and is retried.")
