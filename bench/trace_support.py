"""What the trace scenarios share: the cached sample database, the running system, readers.

* :func:`sample_db` -- the synthetic MES database of a scale, generated once and kept
  under ``bench/.cache/`` (git-ignored), keyed by the scale and a digest of the generator's
  source, so a changed generator makes a new one; :func:`trace_cids` its TMTT trace set.
* :class:`System` -- a private redis-server, the tracebus worker supervisor and the API
  under gunicorn, all started through the bench :class:`~bench.common.Context` (so they are
  stopped at the end), with RSS sampling of the supervisor, its workers and the API.
* :func:`run_http_job` -- submit over HTTP, poll to the end, read ``/stream`` in full,
  digest the rows; :func:`row_digest` -- an order-independent digest of a row multiset.
* :func:`redis_result_bytes` -- MEMORY USAGE summed over keys matching a pattern.
* :func:`set_memory_limit` -- the hard per-process memory cap used by ``memory-limit``
  and as the machine guard of the RQ original (see its docstring for the mechanism).
* :func:`postgres_sample` -- ``--source postgres``: a private PostgreSQL server (started through
  the context, so stopped at the end) with the same sample loaded, and its processes for the
  server's own CPU seconds. Wherever a scenario passes ``db``, a ``postgresql://`` URL instead
  of the file makes the workers, the baseline and the RQ peers read that server.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import resource
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import msgpack
import psutil
import redis

from bench.common import REPO, RssSampler, wait_until

CACHE = Path(__file__).resolve().parent / ".cache"
DOMAINS = ("history", "materials", "rejects", "holds", "jobs")
PROFILE = "query_tool"
USER = "bench"
MB = 2 ** 20


# -- sample data ---------------------------------------------------------------------------
def _generator_digest(scale: float) -> str:
    from tracebus.trace import domains

    digest = hashlib.sha256(repr(float(scale)).encode())
    synth = REPO / "tracebus" / "trace" / "synth"
    for source in sorted(synth.glob("*.py")) + [Path(domains.__file__)]:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def sample_db(scale: float, step=print) -> Path:
    """The sample database at ``scale`` (generated on first use, ~50 s at 1.0)."""
    from tracebus.trace import synth

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"sample-{float(scale):g}-{_generator_digest(scale)}.db"
    if not path.exists():
        for stale in CACHE.glob(f"sample-{float(scale):g}-*.db"):
            stale.unlink()
        step(f"generating the scale-{scale:g} sample database (about {max(1, round(50 * scale))} s)")
        t0 = time.monotonic()
        counts = synth.generate(path, scale=scale)
        step(f"generated {path.name} in {time.monotonic() - t0:.0f} s: "
             f"{sum(v for k, v in counts.items() if k not in ('DW_MES_CONTAINER', 'DW_MES_SPEC_WORKCENTER_V')):,} rows")
    return path


def trace_cids(db: Path) -> list[str]:
    """The TMTT five-month trace CID set of ``db`` (cached next to it)."""
    cached = db.with_suffix(".cids")
    if cached.exists():
        return cached.read_text().split()
    from tracebus.trace import synth

    cids = synth.cids(db)
    cached.write_text("\n".join(cids) + "\n")
    return cids


def is_postgres(db) -> bool:
    return isinstance(db, str) and db.startswith("postgresql://")


def source_env(db) -> dict[str, str]:
    """The environment that points a tracebus process at ``db`` (a SQLite file or a PostgreSQL URL)."""
    if is_postgres(db):
        return {"TRACEBUS_SOURCE": "postgres", "TRACEBUS_POSTGRES_DSN": db}
    return {"TRACEBUS_SQLITE_PATH": str(db)}


class PostgresSample:
    """A private PostgreSQL server holding the sample of a scale (loaded with COPY at start)."""

    def __init__(self, ctx, scale: float):
        from tracebus.pg_proc import PostgresServer
        from tracebus.trace.synth.postgres import generate_postgres

        self.server = PostgresServer().start()  # fsync off, as the tests' servers
        ctx.callback(self.server.stop)
        t0 = time.monotonic()
        counts = generate_postgres(self.server.url, scale=scale)
        self.load_s = time.monotonic() - t0
        self.url = self.server.url
        ctx.step(f"PostgreSQL {self._version()} on 127.0.0.1:{self.server.port}: the scale-{scale:g} sample "
                 f"loaded with COPY in {self.load_s:.0f} s ({sum(counts.values()):,} rows, indexes, ANALYZE)")

    def _version(self) -> str:
        import psycopg

        with psycopg.connect(self.url) as conn:
            return conn.execute("SHOW server_version").fetchone()[0].split()[0]

    def processes(self) -> list[psutil.Process]:
        """The postmaster and every backend and helper it runs."""
        try:
            root = psutil.Process(self.server.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def cpu_s(self) -> float:
        """CPU seconds of the server so far: the postmaster, its living children and the ones it reaped."""
        root = psutil.Process(self.server.process.pid)
        t = root.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in root.children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total


def postgres_sample(ctx, scale: float) -> PostgresSample:
    return PostgresSample(ctx, scale)


# -- row digests -----------------------------------------------------------------------------
#: holds.HOLD_HOURS of a hold never released counts hours up to *now* (DOMAIN.md section 1),
#: so it changes between two reads of the same data; the digest leaves it out for such rows.
_HOLD_STATUS, _HOLD_HOURS = 12, 13


def _row_hash(domain: str, row: Sequence) -> int:
    if domain == "holds" and row[_HOLD_STATUS] == "HOLD":
        row = [*row[:_HOLD_HOURS], None, *row[_HOLD_HOURS + 1:]]
    packed = msgpack.packb([domain, *row], use_bin_type=True)
    return int.from_bytes(hashlib.blake2b(packed, digest_size=8).digest(), "little")


class RowDigest:
    """Order-independent digest of a multiset of (domain, row) pairs: the sum of 64-bit row
    hashes mod 2**64 plus the count, so equal multisets give equal digests whatever the order
    in which the rows were produced, and a missing or duplicated row changes it."""

    def __init__(self):
        self.total = 0
        self.rows = 0
        self.per_domain: dict[str, int] = {}
        self.domain_sums: dict[str, int] = {}

    def add(self, domain: str, rows: Iterable[Sequence]) -> None:
        n = 0
        acc = 0
        for row in rows:
            acc += _row_hash(domain, row)
            n += 1
        self.total = (self.total + acc) & 0xFFFFFFFFFFFFFFFF
        self.domain_sums[domain] = (self.domain_sums.get(domain, 0) + acc) & 0xFFFFFFFFFFFFFFFF
        self.rows += n
        self.per_domain[domain] = self.per_domain.get(domain, 0) + n

    def domain_digests(self) -> dict[str, str]:
        return {d: f"{v:016x}-{self.per_domain[d]}" for d, v in self.domain_sums.items()}

    def hexdigest(self) -> str:
        return f"{self.total:016x}-{self.rows}"


# -- memory caps -----------------------------------------------------------------------------
#: Environment variable read by :mod:`bench.memcap` in each worker after fork.
MEMCAP_ENV = "BENCH_WORKER_RLIMIT_AS_MB"


def set_memory_limit(mb: int) -> None:
    """Cap this process's address space at ``mb`` MiB (``RLIMIT_AS``, soft and hard).

    Why RLIMIT_AS: this machine has cgroup v1 (the memory controller is not enabled in the
    v2 hierarchy, so there is no ``memory.max``), and the only v1 memory cgroups belong to
    the session machinery, which the bench does not touch. RLIMIT_AS bounds *virtual*
    memory, which is stricter than RSS (mapped libraries and reserved malloc arenas count
    too); an allocation past it fails with MemoryError instead of an OOM kill. Call it in
    the child (a ``preexec_fn`` or a worker boot hook).
    """
    limit = mb * MB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# -- the system under test ---------------------------------------------------------------------
class System:
    """Redis + supervisor + gunicorn on ``db``; everything is stopped by ``ctx.close()``.

    Args:
        ctx: the bench context.
        db: the sample database.
        processes: worker processes.
        worker_env: extra environment of the supervisor (e.g. the memory cap).
        api: start gunicorn (2 workers) too.
        extra_modules: more modules for the worker command (e.g. ``bench.memcap``).
        cluster: run on a 3-master Redis Cluster (``redis+cluster://``) instead of one node.
    """

    def __init__(self, ctx, db: Path | str, processes: int = 2, worker_env: dict | None = None,
                 api: bool = True, extra_modules: Sequence[str] = (), api_threads: int = 8,
                 tag: str = "", redis_args: Sequence[str] = (), api_env: dict | None = None,
                 cluster: bool = False):
        self.ctx = ctx
        if cluster:
            from tracebus.engine import connection
            from tracebus.redis_cluster_proc import RedisClusterServers

            self.redis_server = None
            self.cluster = RedisClusterServers(ctx.tmp / f"cluster{tag}").start()
            ctx.callback(self.cluster.stop)
            self.url = self.cluster.url
            self.client = connection.redis_client(self.url)
            ctx.step(f"Redis Cluster of {len(self.cluster.nodes)} masters on {self.url}")
        else:
            self.cluster = None
            self.redis_server = ctx.redis(*redis_args)
            self.url = self.redis_server.url
            self.client = redis.Redis.from_url(self.url)
        self.processes = processes
        self.port = None
        env = {"REDIS_URL": self.url, **source_env(db), "TRACEBUS_LOG_LEVEL": "warning",
               "TRACE_WORKER_COUNT": str(processes), "PYTHONUNBUFFERED": "1",
               # in-flight units per job: one per worker, so every worker has a unit to run
               "TRACE_JOB_MAX_INFLIGHT_UNITS": str(max(2, processes)),
               "TRACE_USER_MAX_INFLIGHT": "50",
               # so that small --scale runs (and the 1K-CID page-cost job) are jobs, not 200s
               "TRACE_ASYNC_CID_THRESHOLD": "500"}
        self.env = env
        name = f"tracebus{tag}"
        self.supervisor = ctx.supervisor(self.url, ["tracebus.trace.tasks", *extra_modules], processes=processes,
                                         queues="trace-events", env={**env, **(worker_env or {})}, name=name)
        self.api = None
        if api:
            from tracebus.redis_proc import free_port

            self.port = free_port()
            api_env = {**env, "TRACEBUS_API_BIND": f"127.0.0.1:{self.port}", "TRACEBUS_API_WORKERS": "2",
                       "TRACEBUS_API_THREADS": str(api_threads), "TRACEBUS_API_MAX_REQUESTS": "0",
                       # the bench names its user from 127.0.0.1 and polls and pages far faster
                       # than the dashboard's rate limits allow
                       "TRACEBUS_TRUSTED_PROXIES": "127.0.0.1", "TRACEBUS_RATE_LIMITS": "off",
                       # the scenarios read tracebus's bare answers, as they did before the
                       # dashboard's routes were enveloped by default
                       "TRACEBUS_API_DASHBOARD_ENVELOPE": "0",
                       **(api_env or {})}
            self.api = ctx.spawn(f"gunicorn{tag}", [sys.executable, "-m", "gunicorn", "-c", "api/gunicorn.conf.py"],
                                 env=api_env)
            wait_until(self._ready, 60, 0.2, "API /readyz")
        else:
            wait_until(lambda: len(self.supervisor.children()) >= processes, 30, 0.1, "workers up")

    def _ready(self) -> bool:
        if not self.supervisor.alive():
            raise RuntimeError(f"supervisor exited:\n{self.supervisor.log_tail()}")
        if self.api is not None and not self.api.alive():
            raise RuntimeError(f"gunicorn exited:\n{self.api.log_tail()}")
        try:
            status, _ = self.http("GET", "/readyz")
            return status == 200
        except OSError:
            return False

    # -- HTTP ---------------------------------------------------------------------------------
    def conn(self, timeout: float = 600) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def http(self, method: str, path: str, body=None, conn=None, headers=None) -> tuple[int, bytes]:
        own = conn is None
        conn = conn or self.conn()
        try:
            headers = {"X-User-Id": USER, **(headers or {})}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            if own:
                conn.close()

    # -- RSS ----------------------------------------------------------------------------------
    def api_processes(self) -> list[psutil.Process]:
        """The gunicorn arbiter and its workers."""
        try:
            root = psutil.Process(self.api.pid)
            return [root, *root.children()]
        except psutil.NoSuchProcess:
            return []

    def workers(self) -> list[psutil.Process]:
        """The supervisor's workers (and anything they fork), re-read at each sample."""
        try:
            return psutil.Process(self.supervisor.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def sampler(self, interval_s: float = 0.1) -> RssSampler:
        s = RssSampler(interval_s)
        s.add("workers", self.workers)
        s.add("supervisor", lambda: [psutil.Process(self.supervisor.pid)])
        if self.api is not None:
            s.add("API", self.api_processes)
        s.add("redis-server", self.redis_processes)
        return s

    def redis_processes(self) -> list[psutil.Process]:
        """The redis-server process, or every master of the cluster."""
        servers = self.cluster.nodes if self.cluster else [self.redis_server]
        return [psutil.Process(server.process.pid) for server in servers]

    def node_clients(self) -> list[redis.Redis]:
        """One plain client per Redis node (one, or each master of the cluster)."""
        return self.cluster.node_clients() if self.cluster else [self.client]

    def redis_used_memory(self) -> int:
        return sum(int(c.info("memory")["used_memory"]) for c in self.node_clients())

    def stop(self) -> None:
        """Stop the API, the supervisor and Redis now (``ctx.close()`` would, at the very end)."""
        for proc in (self.api, self.supervisor):
            if proc is not None:
                proc.stop()
        (self.cluster or self.redis_server).stop()


def chunk_pattern(job_id: str) -> str:
    """SCAN pattern of a job's result chunks (each under its own hash tag, named after the job)."""
    return f"*:job:{{{job_id}:*"


#: Suffix of a chunk's columnar copy key (tracebus.jobs.keys.JobKeys.job_chunk_copy).
COPY_SUFFIX = ":parquet"


def result_bytes(system: System, job_id: str) -> tuple[int, int, int]:
    """(MEMORY USAGE, STRLEN, keys) of a job's result chunks, columnar copies included, over every node."""
    per_node = [redis_result_bytes(c, chunk_pattern(job_id)) for c in system.node_clients()]
    return tuple(sum(n[i] for n in per_node) for i in range(3))


def copy_bytes(system: System, job_id: str, section: str = "*") -> tuple[int, int, int]:
    """(MEMORY USAGE, STRLEN, keys) of the columnar copies of a job's chunks (of one section)."""
    pattern = f"*:job:{{{job_id}:{section}:*{COPY_SUFFIX}"
    per_node = [redis_result_bytes(c, pattern) for c in system.node_clients()]
    return tuple(sum(n[i] for n in per_node) for i in range(3))


def redis_result_bytes(client: redis.Redis, pattern: str) -> tuple[int, int, int]:
    """(MEMORY USAGE sum, STRLEN sum, key count) over the keys matching ``pattern``."""
    usage = strlen = n = 0
    batch: list[bytes] = []

    def flush():
        nonlocal usage, strlen
        pipe = client.pipeline(transaction=False)
        for k in batch:
            pipe.memory_usage(k, samples=0)
            pipe.strlen(k)
        out = pipe.execute()
        usage += sum(v or 0 for v in out[0::2])
        strlen += sum(v or 0 for v in out[1::2])
        batch.clear()

    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        n += 1
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
    return usage, strlen, n


class CpuTracker:
    """CPU seconds (user + system) of groups of processes, sampled from a thread.

    Keeps the last reading of every pid seen, so a process that exits (a replaced worker,
    a burst RQ worker) still counts up to its last sample (at most ``interval_s`` short).
    CPU time is far less sensitive than wall time to other work on a shared machine.
    """

    def __init__(self, interval_s: float = 0.2):
        import threading

        self.interval_s = interval_s
        self.groups: dict[str, object] = {}
        self.cpu: dict[str, dict[int, float]] = {}
        self._base: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="cpu-tracker")

    def add(self, label: str, processes) -> None:
        self.groups[label] = processes
        self.cpu.setdefault(label, {})

    def sample(self) -> None:
        for label, fn in self.groups.items():
            try:
                procs = list(fn())
            except psutil.Error:
                continue
            for p in procs:
                try:
                    t = p.cpu_times()
                    total = t.user + t.system
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                self._base.setdefault(p.pid, total)
                self.cpu[label][p.pid] = total

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()

    def seconds(self) -> dict[str, float]:
        """CPU seconds used during the tracking, per label (summed over its processes)."""
        return {label: round(sum(v - self._base.get(pid, 0.0) for pid, v in per.items()), 1)
                for label, per in self.cpu.items()}


class UsedMemoryPeak:
    """Polls Redis ``used_memory`` from a thread and keeps the peak (and a series)."""

    def __init__(self, url: str, interval_s: float = 0.25, read=None):
        import threading

        self.read = read or (lambda client=redis.Redis.from_url(url): int(client.info("memory")["used_memory"]))
        self.interval_s = interval_s
        self.peak = 0
        self.series: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="used-memory")
        self._t0 = 0.0

    def _sample(self):
        v = self.read()
        self.peak = max(self.peak, v)
        self.series.append((time.monotonic() - self._t0, v))

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except redis.RedisError:
                pass

    def __enter__(self):
        self._t0 = time.monotonic()
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            self._sample()
        except redis.RedisError:
            pass


def submit(system: System, cids: list[str], domains: Sequence[str] = DOMAINS) -> tuple[str, float, int]:
    """POST the trace with ``Cache-Control: no-cache``, so the job runs even when an identical
    one completed before it in the run (issue 38's reuse would answer it from that job's result
    at once); returns (job_id, seconds to the answer, HTTP status)."""
    body = {"profile": PROFILE, "container_ids": cids, "domains": list(domains)}
    data = json.dumps(body).encode()
    conn = system.conn()
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/api/trace/events", body=data,
                     headers={"X-User-Id": USER, "Content-Type": "application/json", "Cache-Control": "no-cache"})
        resp = conn.getresponse()
        payload = resp.read()
        elapsed = time.perf_counter() - t0
    finally:
        conn.close()
    if resp.status != 202:
        raise RuntimeError(f"submit answered {resp.status}: {payload[:500]!r}")
    return json.loads(payload)["job_id"], elapsed, resp.status


def first_page_time(system: System, job_id: str, domain: str, t_submit: float, timeout_s: float = 600) -> float:
    """Seconds from ``t_submit`` (perf_counter) until a ``partial=1`` page of ``domain`` has rows."""
    conn = system.conn()
    try:
        while time.perf_counter() - t_submit < timeout_s:
            status, body = system.http("GET", f"/api/trace/job/{job_id}/result?domain={domain}&offset=0"
                                              f"&limit=5000&partial=1", conn=conn)
            if status == 200 and json.loads(body)["count"] > 0:
                return time.perf_counter() - t_submit
            time.sleep(0.05)
    finally:
        conn.close()
    raise TimeoutError("no first page")


def wait_job(system: System, job_id: str, timeout_s: float = 1800, interval_s: float = 0.25,
             on_poll=None) -> dict:
    """Poll the status until the job is final; returns the last status document."""
    conn = system.conn()
    t0 = time.monotonic()
    try:
        while True:
            status, body = system.http("GET", f"/api/trace/job/{job_id}", conn=conn)
            if status != 200:
                raise RuntimeError(f"status answered {status}: {body[:300]!r}")
            doc = json.loads(body)
            if on_poll is not None:
                on_poll(doc)
            if doc["state"] in ("completed", "partial", "failed", "cancelled"):
                return doc
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"job {job_id} not done in {timeout_s}s: {doc}")
            if not system.supervisor.alive():
                raise RuntimeError(f"supervisor exited:\n{system.supervisor.log_tail()}")
            time.sleep(interval_s)
    finally:
        conn.close()


def read_stream(system: System, job_id: str) -> dict:
    """GET ``/stream`` in full; digest the rows. Returns seconds, bytes, rows, digest."""
    digest = RowDigest()
    conn = system.conn(timeout=1200)
    t0 = time.perf_counter()
    nbytes = 0
    complete = None
    try:
        conn.request("GET", f"/api/trace/job/{job_id}/stream", headers={"X-User-Id": USER})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"stream answered {resp.status}: {resp.read()[:300]!r}")
        columns: dict[str, list[str]] = {}
        for raw in resp:  # line by line (NDJSON)
            nbytes += len(raw)
            msg = json.loads(raw)
            kind = msg["type"]
            if kind == "records":
                domain = msg["domain"]
                data = msg["data"]
                if data:
                    cols = columns.setdefault(domain, list(data[0]))
                    digest.add(domain, ([r[c] for c in cols] for r in data))
            elif kind == "complete":
                complete = msg["total_records"]
            elif kind == "error":
                raise RuntimeError(f"stream error line: {msg}")
    finally:
        conn.close()
    seconds = time.perf_counter() - t0
    if complete != digest.rows:
        raise RuntimeError(f"stream: complete says {complete}, read {digest.rows} rows")
    return {"seconds": seconds, "bytes": nbytes, "rows": digest.rows, "digest": digest.hexdigest(),
            "per_domain": digest.per_domain, "domain_digests": digest.domain_digests()}


def digest_from_redis(system: System, job_id: str) -> dict:
    """The row multiset digest of a completed job read straight from its chunks in Redis
    (the library's layout and codec, no HTTP): faster than ``/stream`` when only the digest matters."""
    from tracebus.jobs.store import JobStore
    from tracebus.trace.settings import TraceSettings

    store = JobStore(system.client, TraceSettings.from_env(system.env))
    digest = RowDigest()
    t0 = time.perf_counter()
    domains = list(store.units_by_section(job_id))
    for domain, layout in store.layouts(job_id, domains).items():
        for _, rows in store.iter_chunks(job_id, domain, layout):
            digest.add(domain, rows)
    return {"seconds": time.perf_counter() - t0, "rows": digest.rows, "digest": digest.hexdigest(),
            "per_domain": digest.per_domain, "domain_digests": digest.domain_digests(), "via": "redis"}


def run_http_job(ctx, system: System, cids: list[str], label: str = "tracebus",
                 stream: bool | str = True, first_page: bool = True, during=None, server=None) -> dict:
    """The whole trace over HTTP with RSS and Redis sampling.

    ``during(job_id)``, if given, runs in a thread while the job runs (chaos, load).
    Returns wall time (submit to completed), time to 202, time to first page, peaks,
    Redis used_memory peak and result bytes, and the stream read (time, rows, digest).
    """
    import threading

    sampler = system.sampler()
    used = UsedMemoryPeak(system.url, read=system.redis_used_memory)
    cpu = CpuTracker()
    cpu.add("workers", system.workers)
    cpu.add("supervisor", lambda: [psutil.Process(system.supervisor.pid)])
    if system.api is not None:
        cpu.add("API", system.api_processes)
    cpu.add("redis-server", system.redis_processes)
    out: dict = {"label": label, "cids": len(cids), "processes": system.processes}
    base_used = system.redis_used_memory()
    server_cpu0 = server.cpu_s() if server is not None else None
    with sampler, used, cpu:
        t_submit = time.perf_counter()
        job_id, t202, _ = submit(system, cids)
        out["job_id"] = job_id
        out["submit_s"] = t202
        ctx.step(f"{label}: submitted {len(cids):,} CIDs, 202 in {t202 * 1000:.0f} ms ({job_id})")
        side = None
        side_result: dict = {}
        if during is not None:
            def _side():
                side_result.update(during(job_id) or {})
            side = threading.Thread(target=_side, daemon=True)
            side.start()
        if first_page:
            out["first_page_s"] = first_page_time(system, job_id, DOMAINS[0], t_submit)
            ctx.step(f"{label}: first page of {DOMAINS[0]} after {out['first_page_s']:.2f} s")
        last = [0.0]

        def progress(doc):
            now = time.monotonic()
            if now - last[0] > 15:
                last[0] = now
                p = doc.get("progress_detail") or {}
                ctx.step(f"{label}: {doc['state']}, {p.get('units_done')}/{p.get('units_total')} units, "
                         f"{p.get('rows')} rows")

        doc = wait_job(system, job_id, on_poll=progress)
        out["wall_s"] = time.perf_counter() - t_submit
        out["state"] = doc["state"]
        out["status_doc"] = doc
        if side is not None:
            side.join(timeout=60)
            out["side"] = side_result
        ctx.step(f"{label}: {doc['state']} in {out['wall_s']:.1f} s")
        out["peaks_mb"] = sampler.peaks_mb()
        out["rss_series"] = sampler.series
    out["cpu_s"] = cpu.seconds()
    if server is not None:
        out["cpu_s"]["postgres"] = round(server.cpu_s() - server_cpu0, 1)
    ctx.step(f"{label}: CPU seconds during the job: {out['cpu_s']}")
    _read_result(ctx, system, job_id, label, stream, out)
    out["rows"] = out.get("stream", {}).get("rows") or _rows_of(doc)
    out["rows_per_s"] = out["rows"] / out["wall_s"] if out["rows"] else None
    out["redis_used_peak_mb"] = used.peak / MB
    out["redis_used_base_mb"] = base_used / MB
    usage, strlen, nkeys = result_bytes(system, job_id)
    c_usage, c_strlen, c_keys = copy_bytes(system, job_id)
    out["result_bytes"] = {"memory_usage": usage, "strlen": strlen, "keys": nkeys, "copy_memory_usage": c_usage,
                           "copy_strlen": c_strlen, "copy_keys": c_keys}
    out["used_series"] = used.series
    return out


def _read_result(ctx, system: System, job_id: str, label: str, stream: bool | str, out: dict) -> None:
    """Read the completed job's rows into ``out["stream"]`` as run_http_job's ``stream`` asks:
    ``"redis"`` straight from the chunks, true over ``/stream`` (with the API's RSS before and
    at its peak during the read, ``api_rss_*`` in ``out``), false not at all."""
    if stream == "redis":
        out["stream"] = digest_from_redis(system, job_id)
        ctx.step(f"{label}: digest of {out['stream']['rows']:,} rows read from the Redis chunks "
                 f"in {out['stream']['seconds']:.1f} s")
        return
    if not stream:
        return
    api_before = _api_rss_max(system)
    stream_sampler = RssSampler(0.1)
    stream_sampler.add("API", system.api_processes)
    with stream_sampler:
        s = read_stream(system, job_id)
    out["stream"] = s
    out["api_rss_before_stream_mb"] = api_before
    out["api_rss_peak_stream_mb"] = stream_sampler.peaks_mb()["API"]
    out["api_rss_growth_mb"] = round(out["api_rss_peak_stream_mb"] - api_before, 1)
    ctx.step(f"{label}: /stream read {s['rows']:,} rows, {s['bytes'] / MB:,.0f} MB in {s['seconds']:.1f} s; "
             f"API RSS {api_before:.0f} -> peak {out['api_rss_peak_stream_mb']:.0f} MB")


def _api_rss_max(system: System) -> float:
    """RSS of the largest API process (the unit the RSS sampler reports), MiB."""
    return round(max((p.memory_info().rss for p in system.api_processes()), default=0) / MB, 1)


def _rows_of(doc: dict) -> int:
    p = doc.get("progress_detail") or {}
    return int(p.get("rows") or 0)




# -- the RQ peers ------------------------------------------------------------------------------
#: Address-space guard of the uncapped RQ original: the machine has 24 GB, the original
#: peaked at 8.1 GB; 12 GB lets it finish and stops a blow-up from taking the machine down.
RQ_GUARD_MB = 12 * 1024
RQ_QUEUE = "bench-trace-rq"


#: Environment of every capped process (tracebus workers and RQ workers alike): glibc reserves
#: 64 MiB of address space per thread arena, which RLIMIT_AS would charge to threaded programs
#: although it is never touched; two arenas keep the cap about memory actually used.
CAP_ENV = {"MALLOC_ARENA_MAX": "2"}
#: An RQ worker whose CPU time does not move for this long is declared hung and stopped.
STALL_S = 45


def run_rq(ctx, url: str, func: str, args: tuple, as_mb: int, label: str, timeout_s: float = 1800,
           env: dict | None = None, server=None) -> dict:
    """Run ``func(*args)`` as one RQ job in an ``rq worker --burst`` SimpleWorker process whose
    address space is capped at ``as_mb`` MiB; sample its RSS; report how it ended.

    Returns wall time (enqueue to the worker's exit), the job's status, its return value or
    the last line of its exception, the worker's exit code, peak RSS and the RSS series.
    """
    from rq import Queue
    from rq.job import Job

    conn = redis.Redis.from_url(url)
    queue = Queue(RQ_QUEUE, connection=conn)
    rq_bin = str(Path(sys.executable).parent / "rq")
    argv = [sys.executable, "-m", "bench.rq_trace", "exec", "--as-mb", str(as_mb), "--",
            rq_bin, "worker", "-u", url, "-w", "rq.SimpleWorker", "--burst", "--quiet", RQ_QUEUE]
    slug = label.lower().replace(" ", "-").replace("(", "").replace(")", "").replace(",", "")
    sampler = RssSampler(0.1)
    used = UsedMemoryPeak(url)
    cpu = CpuTracker(0.1)
    server_cpu0 = server.cpu_s() if server is not None else None
    with sampler, used, cpu:
        t0 = time.perf_counter()
        job = queue.enqueue(func, *args, job_timeout=int(timeout_s), result_ttl=3600, failure_ttl=3600)
        proc = ctx.spawn(f"rq-{slug}", argv, env={"PYTHONUNBUFFERED": "1", **(env or {})})
        root = psutil.Process(proc.pid)
        sampler.add("worker", lambda: [root, *root.children(recursive=True)] if proc.alive() else [])
        cpu.add("worker", lambda: [root, *root.children(recursive=True)] if proc.alive() else [])
        ctx.step(f"{label}: RQ job {job.id} enqueued; SimpleWorker pid {proc.pid}, RLIMIT_AS {as_mb:,} MiB")
        last = time.monotonic()
        hung = False
        cpu_seen, cpu_moved = -1.0, time.monotonic()
        while proc.alive():
            if time.perf_counter() - t0 > timeout_s:
                proc.stop()
                break
            used_cpu = sum(cpu.cpu["worker"].values())
            if used_cpu != cpu_seen:
                cpu_seen, cpu_moved = used_cpu, time.monotonic()
            elif time.monotonic() - cpu_moved > STALL_S:
                hung = True
                ctx.step(f"{label}: no CPU used for {STALL_S} s: hung; stopping it")
                proc.stop()
                break
            if time.monotonic() - last > 15:
                last = time.monotonic()
                ctx.step(f"{label}: running, worker RSS peak so far {sampler.peaks_mb()['worker']:,.0f} MB")
            time.sleep(0.1)
        wall = time.perf_counter() - t0
    code = proc.popen.wait()
    job = Job.fetch(job.id, connection=conn)
    status = job.get_status(refresh=True)
    status = getattr(status, "value", status)
    if hung:
        status = "hung"
    out = {"label": label, "wall_s": wall, "status": str(status), "exit_code": code, "as_mb": as_mb,
           "peak_rss_mb": sampler.peaks_mb()["worker"], "rss_series": sampler.series,
           "redis_used_peak_mb": used.peak / MB, "cpu_s": cpu.seconds()["worker"]}
    if server is not None:
        out["server_cpu_s"] = round(server.cpu_s() - server_cpu0, 1)
    if str(status) == "finished":
        out["result"] = job.return_value()
    else:
        exc = job.exc_info or ""
        lines = [ln for ln in exc.strip().splitlines() if ln.strip()]
        out["error"] = lines[-1] if lines else f"no exception recorded (worker exit code {code})"
        out["log_tail"] = proc.log_tail(1500)
    ctx.step(f"{label}: {out['status']} in {wall:.1f} s, {out['cpu_s']:.0f} CPU s, peak RSS {out['peak_rss_mb']:,.0f} MB"
             + (f", error: {out['error']}" if "error" in out else ""))
    return out


def run_bare(ctx, db: Path | str, cids: list[str], processes: int, domains: Sequence[str] = DOMAINS) -> dict:
    """The job's own statements read by ``processes`` processes, no queue, no Redis
    (:func:`bench.rq_trace.bare`, in a subprocess)."""
    import subprocess

    cids_file = ctx.tmp / "cids.txt"
    cids_file.write_text("\n".join(cids))
    done = subprocess.run([sys.executable, "-m", "bench.rq_trace", "bare", str(db), str(cids_file),
                           ",".join(domains), str(processes)], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"bare read failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    ctx.step(f"bare read on {processes} processes (the job's {out['statements']} statements): {out['rows']:,} rows "
             f"in {out['seconds']:.1f} s, {out['cpu_s']:.0f} CPU s")
    return out


def run_baseline(ctx, db: Path | str, cids: list[str], domains: Sequence[str] = DOMAINS, digest: bool = False,
                 server=None) -> dict:
    """One process reading the rows straight from SQLite, or from PostgreSQL over the workers'
    driver and statements (a subprocess, so its RSS is its own)."""
    import subprocess

    cids_file = ctx.tmp / "cids.txt"
    cids_file.write_text("\n".join(cids))
    argv = [sys.executable, "-m", "bench.rq_trace", "baseline", str(db), str(cids_file), ",".join(domains)]
    if digest:
        argv.append("--digest")
    t0 = time.perf_counter()
    server_cpu0 = server.cpu_s() if server is not None else None
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"baseline failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    out["process_s"] = time.perf_counter() - t0
    if server is not None:
        out["server_cpu_s"] = round(server.cpu_s() - server_cpu0, 1)
    name = "PostgreSQL" if is_postgres(db) else "SQLite"
    ctx.step(f"{name} baseline (one process, no queue): {out['rows']:,} rows in {out['seconds']:.1f} s "
             f"({out['rows'] / out['seconds']:,.0f} rows/s, {out['cpu_s']:.0f} CPU s"
             + (f", server {out['server_cpu_s']:.0f} CPU s" if server is not None else "")
             + f"), peak RSS {out['peak_rss_mb']:.0f} MB")
    return out
