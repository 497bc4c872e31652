"""What an operator's view shows of the engine (the web monitor's JSON): queues, workers, Redis.

Read-only, a few round trips whatever the load, like :class:`tracebus.engine.metrics.SystemCollector`:

* :func:`queues` -- per queue the counts of :meth:`Broker.queue_stats`, the ``lag_ms`` (age of
  the oldest entry no worker has taken yet, by the entry id's time against Redis' clock), and
  the cumulative counters of the stats hash, so a reader computes rates from two readings;
* :func:`workers_by_host` -- the worker registry grouped per host, with each worker's age;
* :func:`redis_health` -- memory against ``maxmemory``, the eviction policy, persistence.

On a Redis Cluster a queue's XINFO, XRANGE and TIME go to the master owning the queue's
slot (its entry ids carry that master's clock), and INFO is read from every master: the
answer sums them and lists each master under ``nodes``.
"""

from __future__ import annotations

import redis

from tracebus.engine.cluster_client import is_cluster
from tracebus.engine.keys import GROUP
from tracebus.engine.redis_errors import translate_errors
from tracebus.engine.redis_memory import master_infos

#: Counters of the stats hash reported per queue (see :mod:`tracebus.engine.metrics`).
QUEUE_COUNTERS = ("processed", "failed", "retried", "dead_lettered")


def redis_now_ms(client) -> int:
    """Redis' clock in ms (hosts' clocks may differ; entry ids carry Redis' time)."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _lag_ms(client, stream: str, now_ms: int) -> int:
    """Age of the oldest entry after the group's last delivered id (0: none waiting)."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream yet
        return 0
    group = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
    if group is None:
        return 0
    last = group["last-delivered-id"]
    last = last.decode() if isinstance(last, bytes) else last
    waiting = client.xrange(stream, f"({last}", "+", count=1)
    if not waiting:
        return 0
    entry_ms = int(waiting[0][0].decode().split("-")[0])
    return max(0, now_ms - entry_ms)


@translate_errors
def queues(broker, extra=()) -> dict:
    """Every declared queue (plus ``extra``) with its counts, lag and counters.

    Returns:
        dict: ``{"time_ms": <Redis' clock>, "queues": [{"queue", "length", "pending",
        "delayed", "dead", "lag_ms", "processed", "failed", "retried", "dead_lettered"}]}``.
    """
    names = sorted(set(broker.queues()) | set(extra))
    now_ms = redis_now_ms(broker.client)
    stats = broker.stats()
    out = []
    for name in names:
        row = broker.queue_stats(name)
        stream = broker.keys.stream(name)
        if is_cluster(broker.client):  # the queue's own master: its clock stamped the entry ids
            node = broker._slot_client(stream)
            row["lag_ms"] = _lag_ms(node, stream, redis_now_ms(node))
        else:
            row["lag_ms"] = _lag_ms(broker.client, stream, now_ms)
        row.update({c: stats.get(f"{c}:{name}", 0) for c in QUEUE_COUNTERS})
        out.append(row)
    return {"time_ms": now_ms, "queues": out}


def _worker_row(raw: dict, now_ms: int) -> dict:
    started = int(raw.get("started_ms") or 0)
    seen = int(raw.get("seen_ms") or 0)
    return {"consumer": raw.get("consumer", ""), "pid": int(raw.get("pid") or 0),
            "queues": [q for q in raw.get("queues", "").split(",") if q],
            "current": raw.get("current") or None, "done": int(raw.get("done") or 0),
            "rss_bytes": int(raw.get("rss_bytes") or 0),
            "age_s": round(max(0, now_ms - started) / 1000, 1) if started else None,
            "seen_s_ago": round(max(0, now_ms - seen) / 1000, 1) if seen else None}


@translate_errors
def workers_by_host(broker, registry) -> dict:
    """Live workers grouped per host, hosts and workers sorted by name and pid.

    Args:
        registry: the :class:`~tracebus.engine.registry.WorkerRegistry` to list.

    Returns:
        dict: ``{"time_ms", "hosts": [{"host", "workers": [{"consumer", "pid", "queues",
        "current", "done", "rss_bytes", "age_s", "seen_s_ago"}]}]}``.
    """
    now_ms = redis_now_ms(broker.client)
    hosts: dict[str, list[dict]] = {}
    for raw in registry.list():
        hosts.setdefault(raw.get("host", ""), []).append(_worker_row(raw, now_ms))
    return {"time_ms": now_ms, "hosts": [{"host": h, "workers": sorted(ws, key=lambda w: w["pid"])}
                                         for h, ws in sorted(hosts.items())]}


def _save_points(client, node: str = "") -> str | None:
    """The ``save`` setting (RDB snapshot points), or None where CONFIG is refused (managed Redis)."""
    try:
        if node:  # one master of a cluster
            host, _, port = node.rpartition(":")
            client = client.get_redis_connection(client.get_node(host, int(port)))
        value = client.config_get("save").get("save")
    except redis.ResponseError:
        return None
    return value.decode() if isinstance(value, bytes) else value


@translate_errors
def redis_health(client) -> dict:
    """Memory, eviction policy, persistence and load of the Redis server (``INFO``).

    Returns:
        dict: ``version``, ``uptime_s``, ``connected_clients``, ``memory`` (``used_bytes``,
        ``peak_bytes``, ``max_bytes`` (0: no limit), ``used_ratio`` (None without a limit),
        ``policy``, ``evicted_keys``), ``persistence`` (``rdb_save_points`` (None: unknown),
        ``rdb_last_save_time``, ``rdb_changes_since_save``, ``rdb_last_bgsave_status``,
        ``aof_enabled``, ``aof_last_write_status``, ``loading``). On a cluster these are the
        masters taken together (memory summed, ``used_ratio`` and ``policy`` of the fullest
        master, the weakest persistence, ``mode`` "cluster") and ``nodes`` lists each master
        the same way, with its ``node`` (``host:port``).
    """
    infos = master_infos(client)
    nodes = [_health(client, node, info) for node, info in infos]
    if len(nodes) == 1 and not infos[0][0]:
        return nodes[0]
    return {**_total(nodes), "nodes": nodes}


def _health(client, node: str, info: dict) -> dict:
    used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
    out = {"node": node} if node else {}
    return {
        **out,
        "version": str(info.get("redis_version", "")), "mode": info.get("redis_mode", ""),
        "uptime_s": int(info.get("uptime_in_seconds", 0)),
        "connected_clients": int(info.get("connected_clients", 0)),
        "memory": {"used_bytes": used, "peak_bytes": int(info.get("used_memory_peak", 0)),
                   "max_bytes": limit, "used_ratio": round(used / limit, 4) if limit else None,
                   "policy": info.get("maxmemory_policy", ""),
                   "evicted_keys": int(info.get("evicted_keys", 0))},
        "persistence": {"rdb_save_points": _save_points(client, node),
                        "rdb_last_save_time": int(info.get("rdb_last_save_time", 0)),
                        "rdb_changes_since_save": int(info.get("rdb_changes_since_last_save", 0)),
                        "rdb_last_bgsave_status": info.get("rdb_last_bgsave_status", ""),
                        "aof_enabled": bool(int(info.get("aof_enabled", 0))),
                        "aof_last_write_status": info.get("aof_last_write_status", ""),
                        "loading": bool(int(info.get("loading", 0)))},
    }


def _total(nodes: list[dict]) -> dict:
    """The masters of a cluster as one server: memory and clients summed, the fullest master's
    ratio and policy (the first to refuse writes), the weakest persistence."""
    mem = [n["memory"] for n in nodes]
    per = [n["persistence"] for n in nodes]
    fullest = max(mem, key=lambda m: m["used_ratio"] or 0)
    ratios = [m["used_ratio"] for m in mem if m["used_ratio"] is not None]
    limited = all(m["max_bytes"] for m in mem)
    used, limit = sum(m["used_bytes"] for m in mem), sum(m["max_bytes"] for m in mem) if limited else 0
    bad_bgsave = [p["rdb_last_bgsave_status"] for p in per if p["rdb_last_bgsave_status"] != "ok"]
    bad_aof = [p["aof_last_write_status"] for p in per
               if p["aof_enabled"] and p["aof_last_write_status"] != "ok"]
    points = {p["rdb_save_points"] for p in per}
    return {
        "version": min(n["version"] for n in nodes), "mode": "cluster",
        "uptime_s": min(n["uptime_s"] for n in nodes),
        "connected_clients": sum(n["connected_clients"] for n in nodes),
        "memory": {"used_bytes": used, "peak_bytes": sum(m["peak_bytes"] for m in mem), "max_bytes": limit,
                   "used_ratio": max(ratios) if ratios else None, "policy": fullest["policy"],
                   "evicted_keys": sum(m["evicted_keys"] for m in mem)},
        "persistence": {"rdb_save_points": points.pop() if len(points) == 1 else None,
                        "rdb_last_save_time": min(p["rdb_last_save_time"] for p in per),
                        "rdb_changes_since_save": sum(p["rdb_changes_since_save"] for p in per),
                        "rdb_last_bgsave_status": bad_bgsave[0] if bad_bgsave else "ok",
                        "aof_enabled": all(p["aof_enabled"] for p in per),
                        "aof_last_write_status": bad_aof[0] if bad_aof else "ok",
                        "loading": any(p["loading"] for p in per)},
    }
