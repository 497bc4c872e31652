"""Helpers of the reliability suite (tests/test_reliability_*.py): faults with real processes.

Each reliability module runs its own redis-server (it restarts it, fills it up or gives it
AOF), which replaces the session server for that module by overriding the ``redis_server``
fixture; the ``supervisor`` fixture of conftest_proc.py then runs real trace workers on it.
The sweeper runs every second with a two-second grace, so stranded jobs are found quickly.
A result is compared with the direct query through a digest of its rows in every domain.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from tests.conftest_trace import DOMAINS, page_all
from tests.helpers import NO_REUSE
from tests.redis_server import RedisServer

#: A Redis that keeps everything across a restart.
AOF = ("--appendonly", "yes", "--appendfsync", "always")

#: Worker and service settings of the reliability tests: many small units, a quick sweeper.
FAULT_ENV = {"TRACE_CHUNK_CIDS": "50", "TRACE_JOB_MAX_INFLIGHT_UNITS": "2", "TRACE_STREAM_BATCH_SIZE": "200",
             "TRACE_JOB_SWEEP_SECONDS": "1", "TRACE_JOB_SWEEP_GRACE_SECONDS": "2",
             "TRACE_JOB_TIMEOUT_SECONDS": "120", **NO_REUSE}


def digest_of(rows_by_domain: dict[str, Counter]) -> str:
    """SHA-256 over every domain's rows in a canonical order (a multiset digest)."""
    h = hashlib.sha256()
    for domain in DOMAINS:
        h.update(domain.encode())
        for row in sorted(repr(r) for r in rows_by_domain[domain].elements()):
            h.update(row.encode() + b"\n")
    return h.hexdigest()


def result_digest(svc, job_id: str) -> str:
    """The digest of a finished job's rows, read page by page."""
    return digest_of({d: Counter(page_all(svc, job_id, d)) for d in DOMAINS})


def own_redis(tmp_path_factory, name: str, *extra_args: str):
    """Body of a module's ``redis_server`` fixture: a redis-server of its own, stopped after."""
    server = RedisServer(tmp_path_factory.mktemp(name), extra_args=extra_args).start()
    yield server
    server.stop()
