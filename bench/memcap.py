"""A worker boot hook for the ``memory-limit`` scenario: cap each worker's address space.

Added to the worker command (``python -m tracebus worker tracebus.trace.tasks bench.memcap``),
it runs in every worker right after fork and before any message, and sets ``RLIMIT_AS`` to
``$BENCH_WORKER_RLIMIT_AS_MB`` MiB (nothing when unset or 0). The supervisor itself is not
capped. See :func:`bench.trace_support.set_memory_limit` for why RLIMIT_AS.
"""

import os

from tracebus.engine.boot import on_worker_boot

from bench.trace_support import MEMCAP_ENV, set_memory_limit


@on_worker_boot
def cap_address_space() -> None:
    mb = int(os.environ.get(MEMCAP_ENV) or 0)
    if mb > 0:
        set_memory_limit(mb)
