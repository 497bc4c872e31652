"""Server-sent events of a job's progress (``GET /api/trace/job/{id}/events``).

The body replays the job's progress stream from ``Last-Event-ID`` (or from the start)
and then follows it with blocking reads: each progress entry becomes
``id: <stream id>`` / ``event: progress`` / ``data: {...}``. When the job is in a final
state the body ends with ``event: end`` whose data is the status document as
``GET /api/trace/job/{id}`` shows it (:mod:`tracebus.trace.dashview`). A comment line
(``: heartbeat``) goes out after ``heartbeat_s`` of silence, so proxies keep the connection
and a vanished client is noticed. After ``max_s`` the body ends without ``end``; the
client reconnects with ``Last-Event-ID`` and loses nothing (this frees the server thread
of a forgotten tab).
"""

from __future__ import annotations

import json
import re
import time
from typing import Callable, Iterator

from tracebus.errors import InvalidParams, TracebusError
from tracebus.trace.dashview import dashboard_progress, dashboard_status
from tracebus.trace.states import V1_STATUS
from tracebus.jobs.states import FINAL_STATES

#: Content type of the body.
CONTENT_TYPE = "text/event-stream; charset=utf-8"
#: Reconnection delay suggested to the client (``retry:``), in milliseconds.
RETRY_MS = 3000
#: Longest single blocking read; the heartbeat and the deadline are checked between reads.
#: Below the Redis client's socket timeout (TRACEBUS_REDIS_TIMEOUT_SECONDS: 4 s by default).
MAX_BLOCK_MS = 3000
#: A progress-stream id as ``Last-Event-ID`` may carry it (19 digits: below 2**64 by construction).
_EVENT_ID = re.compile(r"[0-9]{1,19}-[0-9]{1,19}")
#: The same, or empty, as the OpenAPI document states it.
EVENT_ID_PATTERN = f"^({_EVENT_ID.pattern})?$"


def check_event_id(value: str | None) -> str:
    """The progress-stream id to resume after (``0-0`` for none).

    Raises:
        InvalidParams: ``value`` is not a stream id (``<ms>-<seq>``).
    """
    if value is None or not value.strip():
        return "0-0"
    value = value.strip()
    if not _EVENT_ID.fullmatch(value):
        raise InvalidParams(f"Last-Event-ID must be an event id like '1700000000000-0', got {value[:40]!r}")
    return value


def frame(event: str, data: dict, event_id: str | None = None) -> bytes:
    """One SSE message (the JSON data is on one line)."""
    head = f"id: {event_id}\n" if event_id else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n".encode("utf-8")


def progress_data(fields: dict[str, str]) -> dict:
    """A progress entry as event data: counters as numbers, plus the public ``status`` as the
    status endpoint shows it (cancelled: ``failed`` + ``JOB_CANCELLED``; ``state`` is internal)."""
    data: dict = {k: int(v) if v.isdigit() else v for k, v in fields.items()}
    state = data.get("status")
    if state is not None:
        data["state"] = state
        data["status"] = V1_STATUS.get(state, state)
    return dashboard_progress(data)


class ProgressEvents:
    """The SSE body of one job for one client.

    Args:
        service: the :class:`~tracebus.trace.service.TraceService`.
        job_id(str): the job (ownership already checked by the caller).
        user(str): the caller, for the service's ownership checks on every read.
        last_id(str): resume after this progress id.
        heartbeat_s(int): silence before a heartbeat comment.
        max_s(int): lifetime of the body.
        clock(Callable[[], float]): monotonic seconds.
    """

    def __init__(self, service, job_id: str, user: str, last_id: str, heartbeat_s: int, max_s: int,
                 clock: Callable[[], float] = time.monotonic):
        self.service, self.job_id, self.user, self.last_id = service, job_id, user, last_id
        self.heartbeat_s, self.max_s, self.clock = heartbeat_s, max_s, clock

    def __iter__(self) -> Iterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        start = last_write = self.clock()
        block_ms = min(self.heartbeat_s * 1000, MAX_BLOCK_MS)
        while self.clock() - start < self.max_s:
            try:
                entries = self.service.progress(self.job_id, self.last_id, block_ms=block_ms, user=self.user)
                for event_id, fields in entries:
                    self.last_id = event_id
                    yield frame("progress", progress_data(fields), event_id)
                    last_write = self.clock()
                # Only the newest entry matters: an old final one may precede a retry.
                if not entries or entries[-1][1].get("status") in FINAL_STATES:
                    doc = self.service.status(self.job_id, user=self.user)
                    if doc["state"] in FINAL_STATES:
                        yield frame("end", dashboard_status(doc), self.last_id)
                        return
            except TracebusError as e:  # job expired, Redis gone: say so, then end
                yield frame("error", {"code": e.code, "message": e.message})
                return
            if self.clock() - last_write >= self.heartbeat_s:
                yield b": heartbeat\n\n"
                last_write = self.clock()
