"""Test helpers: waiting on conditions with a deadline instead of bare sleeps."""

from __future__ import annotations

import signal
import time
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02,
             message: str = "condition") -> T:
    """Poll ``condition`` until it returns a truthy value, or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {message}")
        time.sleep(interval_s)


def ndjson_lines(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The lines (each with its newline) of an NDJSON body given in pieces as it is streamed: a
    ``records`` line goes out in several pieces (:data:`tracebus.trace.ndjson.RECORDS_SLICE_ROWS`)."""
    rest = b""
    for piece in pieces:
        *done, rest = (rest + piece).split(b"\n")
        yield from (line + b"\n" for line in done)
    assert not rest, f"an unterminated line at the end: {rest[:200]!r}"


#: The environment of tests that run every request they send: an identical request of an
#: earlier test (any user) would otherwise be answered from its stored result (issue 38; reuse
#: has its own tests, test_reuse*.py).
NO_REUSE = {"TRACE_RESULT_REUSE_MAX_AGE_S": "0"}


def create_trace_job(store, request: dict) -> str:
    """Admit a trace request (a dict as the API receives it, with ``user``) in ``store``,
    as :class:`tracebus.trace.service.TraceService` does, without sending units."""
    from tracebus.trace import request as jobrequest
    from tracebus.trace.events.kind import to_spec
    from tracebus.trace.settings import TraceSettings
    from tracebus.trace.events.kind import ACTOR_NAME

    settings = TraceSettings.adopt(store.settings)
    spec = to_spec(jobrequest.normalize(request), settings.chunk_cids, settings.queue, ACTOR_NAME)
    return store.create(spec)


def run_trace_unit_here(broker, settings, source, job_id: str, unit: int, store=None) -> None:
    """Run one trace unit in the test process with the real runner and unit code (as a worker
    would, minus the queue): begin, fetch into fenced chunks, commit, settle, refill."""
    from tracebus.jobs import runner
    from tracebus.jobs.dispatch import Dispatcher
    from tracebus.jobs.store import JobStore
    from tracebus.trace.events.kind import EVENTS
    from tracebus.trace.runtime import Runtime, TraceUnit

    store = store or JobStore(broker.client, settings)
    runner.bind(store, Dispatcher(broker, store))
    rt = Runtime(settings, source)
    runner.run_unit(lambda ctx: EVENTS.run_unit(TraceUnit(ctx, rt)), job_id, unit)


def interruptible() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT (Ctrl-C): its SIGINT at the
    default, whatever the suite inherited. A suite started as a background job of a
    non-interactive shell (``cmd &``, as CI runners and ``nohup`` do) runs with SIGINT ignored;
    a child inherits that, and Python then installs no KeyboardInterrupt handler, so the
    interrupted child ran on (seen in a campaign run: two status --watch tests hung 20 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
