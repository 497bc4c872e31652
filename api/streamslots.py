"""A cap on the streamed bodies one API worker holds open, and on those of one caller.

Every streamed body (event streams, NDJSON and whole results, exports, followed or not) is
a connection held for long; an event stream or a followed result also holds a pooled Redis
connection in a blocking read for most of its life. Past ``TRACEBUS_API_MAX_STREAMS`` open
in this worker a new one is 503 with ``Retry-After``, so the pool keeps connections for
every other route; past ``TRACEBUS_API_MAX_STREAMS_PER_CALLER`` of one caller it is 429.
Counted per worker process (a caller's streams spread over workers count in each).

While a body streams, its socket's timeout is ``TRACEBUS_API_WRITE_TIMEOUT_S``: a client
that stops reading fills its TCP window, the next write waits that long and fails, and
gunicorn drops the connection (closing the body, which gives the slot back).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Iterator

import falcon

from api import heap
from api.errors import envelope


class StreamSlots:
    """Falcon middleware counting open streamed bodies (``resp.stream``) and refusing past the caps.

    Args:
        per_worker(int): most open at once in this process.
        per_caller(int): most open at once for one caller (``req.context.user``).
        retry_after_s(int): ``Retry-After`` of a refusal.
    """

    def __init__(self, per_worker: int, per_caller: int, retry_after_s: int, write_timeout_s: float | None = None):
        self.per_worker, self.per_caller, self.retry_after_s = per_worker, per_caller, retry_after_s
        self.write_timeout_s = write_timeout_s
        self.open = 0
        self.by_caller: Counter[str] = Counter()
        self._lock = threading.Lock()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool) -> None:
        if resp.stream is None or not req_succeeded:
            return
        caller = getattr(req.context, "user", None) or req.remote_addr or "?"
        refusal = self._take(caller)
        if refusal is None:
            resp.stream = self._released(resp.stream, caller, req.env.get("gunicorn.socket"))
            return
        status, code, message = refusal
        close = getattr(resp.stream, "close", None)
        if close is not None:
            close()  # the body's generator ends now: its cursor or Redis read is released
        resp.stream = None
        resp.status = status
        resp.content_type = falcon.MEDIA_JSON
        resp.media = envelope(code, message)
        resp.set_header("Retry-After", str(self.retry_after_s))

    def _take(self, caller: str):
        with self._lock:
            if self.open >= self.per_worker:
                return (503, "SERVICE_UNAVAILABLE",
                        f"this API worker already serves {self.open} streams (TRACEBUS_API_MAX_STREAMS); retry later")
            if self.by_caller[caller] >= self.per_caller:
                return (429, "TOO_MANY_REQUESTS",
                        f"you already have {self.by_caller[caller]} streams open here "
                        f"(TRACEBUS_API_MAX_STREAMS_PER_CALLER); close one or retry later")
            self.open += 1
            self.by_caller[caller] += 1
        return None

    def _release(self, caller: str) -> None:
        with self._lock:
            self.open -= 1
            self.by_caller[caller] -= 1
            if self.by_caller[caller] <= 0:
                del self.by_caller[caller]
            last = self.open == 0
        heap.trim(force=last)  # what the stream's pieces took goes back to the system

    def _released(self, body, caller: str, sock) -> "_Held":
        if sock is None or self.write_timeout_s is None:
            return _Held(body, lambda: self._release(caller))
        previous = sock.gettimeout()
        sock.settimeout(self.write_timeout_s)

        def release() -> None:
            try:
                sock.settimeout(previous)  # keep-alive reads go back to gunicorn's own timing
            except OSError:  # already closed
                pass
            self._release(caller)

        return _Held(body, release)


class _Held:
    """A streamed body that gives its slot back once, when it ends or is closed (the WSGI
    server always calls ``close()``, also for a body never read: a generator's ``finally``
    would not run then)."""

    def __init__(self, body, release):
        self.body, self.chunks, self._release = body, iter(body), release

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self.chunks)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        if release is None:
            return
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            release()
