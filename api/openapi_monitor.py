"""OpenAPI paths and schemas of the web monitor (part of :mod:`api.openapi`).

The page (``/``, ``/ui``, ``/ui/{name}``), the read-only JSON it polls (``/api/v1/me``,
``states``, ``queues``, ``workers``, ``redis``) and the operators' dead-letter routes
(:mod:`api.resources.monitor`, :mod:`api.resources.dead_letters`).
"""

from __future__ import annotations

from api.pathparams import FILE_NAME_PATTERN
from api.resources.dead_letters import LIST_QUERY, TARGETS_REQUEST

_OBJ, _STR, _INT, _BOOL = {"type": "object"}, {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_NULL_INT, _NULL_STR, _NUM = {"type": ["integer", "null"]}, {"type": ["string", "null"]}, {"type": "number"}
_STRS = {"type": "array", "items": _STR}


def _obj(required: list[str], **properties) -> dict:
    return {"type": "object", "required": required, "properties": properties}


def monitor_schemas() -> dict:
    queue = _obj(["queue", "length", "pending", "delayed", "dead", "lag_ms"],
                 queue=_STR, length={**_INT, "description": "waiting, not yet delivered"},
                 pending={**_INT, "description": "delivered to a worker, not yet acknowledged"},
                 delayed={**_INT, "description": "scheduled for later (retries with backoff)"},
                 dead={**_INT, "description": "records in the dead-letter stream"},
                 lag_ms={**_INT, "description": "age of the oldest waiting message (0: none waits)"},
                 processed=_INT, failed=_INT, retried=_INT,
                 dead_lettered={**_INT, "description": "cumulative counters: rates are their "
                                                       "differences between two readings over time_ms"})
    worker = _obj(["consumer", "pid", "queues", "current", "done", "rss_bytes"],
                  consumer=_STR, pid=_INT, queues=_STRS,
                  current={**_NULL_STR, "description": "`actor:message_id` being run (null: idle)"},
                  done={**_INT, "description": "messages run since the worker started"}, rss_bytes=_INT,
                  age_s={"type": ["number", "null"]}, seen_s_ago={"type": ["number", "null"]})
    record = _obj(["queue", "id", "time", "deliveries", "reason"],
                  queue=_STR, id=_STR, time={**_NUM, "description": "epoch seconds it was dead-lettered"},
                  deliveries=_INT, reason={**_STR, "description": "why (first line)"},
                  traceback={**_NULL_STR, "description": "the actor's traceback, when it raised"},
                  actor=_NULL_STR, message_id=_NULL_STR, args={"type": ["array", "null"]},
                  retries=_INT)
    redis_server = _obj(["version", "memory", "persistence"], version=_STR, mode=_STR, uptime_s=_INT,
                        connected_clients=_INT,
                        memory=_obj(["used_bytes", "max_bytes", "policy"], used_bytes=_INT, peak_bytes=_INT,
                                    max_bytes={**_INT, "description": "maxmemory (0: no limit)"},
                                    used_ratio={"type": ["number", "null"]}, policy=_STR,
                                    evicted_keys=_INT),
                        persistence=_obj(["aof_enabled"], rdb_save_points={
                            **_NULL_STR, "description": "the `save` setting (null: CONFIG refused)"},
                            rdb_last_save_time=_INT, rdb_changes_since_save=_INT,
                            rdb_last_bgsave_status=_STR, aof_enabled=_BOOL, aof_last_write_status=_STR,
                            loading=_BOOL))
    return {
        "JobStates": _obj(
            ["states", "active", "retryable", "with_result", "codes"],
            states={**_STRS, "description": "every job state, in order"},
            active={**_STRS, "description": "states in which a job runs or waits to (it can be cancelled)"},
            retryable={**_STRS, "description": "states a retry re-runs"},
            with_result={**_STRS, "description": "states whose result can be read"},
            codes={"type": "object", "additionalProperties": _STR,
                   "description": "state -> the code the dashboard's poller reads beside it"}),
        "Me": _obj(["user", "anonymous", "admin"], user=_STR, anonymous=_BOOL,
                   admin={**_BOOL, "description": "an operator (TRACEBUS_API_ADMINS)"}),
        "QueueList": _obj(["time_ms", "queues", "source_sessions"], time_ms={**_INT, "description": "Redis' clock"},
                          queues={"type": "array", "items": queue},
                          source_sessions={**_obj(["in_use", "waiting", "max"], in_use=_INT, waiting=_INT, max=_INT),
                                           "description": "sessions the workers of all hosts hold against the "
                                                          "source, units waiting for one, and the cap "
                                                          "(TRACEBUS_SOURCE_MAX_SESSIONS)"}),
        "WorkerList": _obj(["time_ms", "hosts"], time_ms=_INT, hosts={"type": "array", "items": _obj(
            ["host", "workers"], host=_STR, workers={"type": "array", "items": worker})}),
        "RedisHealth": {**redis_server, "properties": {**redis_server["properties"], "nodes": {
            "type": "array", "items": {**redis_server, "required": ["node", *redis_server["required"]],
                                       "properties": {**redis_server["properties"], "node": {
                                           **_STR, "description": "the master's host:port"}}},
            "description": "a Redis Cluster only: each master (the fields above are the masters "
                           "together: memory summed, used_ratio and policy of the fullest master)"}}},
        "DeadLetterList": _obj(["queues", "records"], queues=_STRS,
                               records={"type": "array", "items": record,
                                        "description": "newest first"}),
        "DeadLetterTargets": TARGETS_REQUEST.schema(),
        "DeadLetterRequeued": _obj(["queue", "requeued", "skipped"], queue=_STR,
                                   requeued={"type": "array", "items": _obj(["id", "requeued_as"], id=_STR,
                                                                            requeued_as=_STR)},
                                   skipped={"type": "array", "items": _obj(["id", "reason"], id=_STR,
                                                                          reason=_STR)}),
        "DeadLetterPurged": _obj(["queue", "deleted", "missing"], queue=_STR, deleted=_INT, missing=_STRS),
    }


def monitor_paths(op, json_, ref) -> dict:
    """The monitor's routes, built with :mod:`api.openapi`'s helpers."""
    html = {"200": {"description": "the web monitor (a static page; it calls the JSON API)",
                    "content": {"text/html": {"schema": _STR}}}}
    forbidden = {"403": json_(ref("Error"), "FORBIDDEN: the caller is not an operator (TRACEBUS_API_ADMINS)")}
    targets = {"required": True, "content": {"application/json": {"schema": ref("DeadLetterTargets")}}}
    action_errors = {**forbidden, "415": json_(ref("Error"), "UNSUPPORTED_MEDIA_TYPE: the body must be sent "
                                                            "as application/json")}
    queue_param = LIST_QUERY.parameters()
    return {
        "/": {"get": op("The web monitor", html, (), protected=False)},
        "/ui": {"get": op("The web monitor", html, (), protected=False)},
        "/ui/{name}": {"get": op(
            "A file of the web monitor (monitor.js, monitor.css)",
            {"200": {"description": "the file", "content": {"text/javascript": {"schema": _STR},
                                                           "text/css": {"schema": _STR}}},
             "404": json_(ref("Error"), "NOT_FOUND: no such file")}, (),
            [{"name": "name", "in": "path", "required": True, "schema": {**_STR, "pattern": FILE_NAME_PATTERN},
              "description": "anything else: 404"}], protected=False)},
        "/api/v1/me": {"get": op("Who the API takes the caller for, and whether they are an operator",
                                 {"200": json_(ref("Me"), "the caller")}, ())},
        "/api/v1/states": {"get": op("The job states as the monitor shows them: their order, which are "
                                     "active, retryable or have a result, and their codes",
                                     {"200": json_(ref("JobStates"), "the states")}, ())},
        "/api/v1/queues": {"get": op("Every queue: counts, lag and cumulative counters",
                                     {"200": json_(ref("QueueList"), "the queues")}, ("503",))},
        "/api/v1/workers": {"get": op("Live workers per host: current message, RSS, messages done, age",
                                      {"200": json_(ref("WorkerList"), "the workers")}, ("503",))},
        "/api/v1/redis": {"get": op("The Redis server: memory against maxmemory, eviction policy, persistence",
                                    {"200": json_(ref("RedisHealth"), "Redis' health")}, ("503",))},
        "/api/v1/dead-letters": {"get": op(
            "Dead-lettered messages with their reason and traceback (operators only)",
            {"200": json_(ref("DeadLetterList"), "the records"), **forbidden}, ("400", "404", "503"), queue_param)},
        "/api/v1/dead-letters/requeue": {"post": op(
            "Send dead-lettered messages back to their queue with a fresh set of retries, each at most "
            "once (operators only)",
            {"200": json_(ref("DeadLetterRequeued"), "what was requeued, and what was not and why"),
             **action_errors}, ("400", "404", "503"), requestBody=targets)},
        "/api/v1/dead-letters/purge": {"post": op(
            "Delete dead-letter records for good (operators only)",
            {"200": json_(ref("DeadLetterPurged"), "how many were deleted; ids not found"),
             **action_errors}, ("400", "404", "503"), requestBody=targets)},
    }
