"""Helpers shared by the operator commands: the library handles, text formatting, HTTP.

Not a command (``tracebus/cli.py`` skips modules whose name starts with ``_``).
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Iterable, Sequence

from tracebus import errors
from tracebus.engine import errors as engine_errors
from tracebus.engine import dead_letters
from tracebus.jobs import errors as job_errors
from tracebus.trace import errors as trace_errors
from tracebus.engine.actor import set_broker
from tracebus.engine.broker import Broker
from api.settings import ApiSettings
from tracebus.errors import TracebusError


def open_service(settings: ApiSettings):
    """(broker, TraceService) on the configured Redis; units are sent through this broker."""
    from tracebus.trace.service import TraceService

    broker = Broker(settings)
    set_broker(broker)
    return broker, TraceService(settings, broker)


def known_queues(broker: Broker) -> list[str]:
    """Every declared queue, plus the trace queue even before anything declared it (as the API
    lists them)."""
    return dead_letters.known_queues(broker, broker.settings.queue)


def int_at_least(minimum: int):
    """An argparse ``type`` accepting integers >= ``minimum`` (bad input: exit code 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}")
        return value

    return parse


# -- formatting ----------------------------------------------------------------------------------
def fmt_bytes(n: int | str | None) -> str:
    if n in (None, ""):
        return "-"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def fmt_duration(seconds: float | None) -> str:
    """``1:02:03`` / ``2:03``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def fmt_time(epoch_s: float | None) -> str:
    if not epoch_s:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))


def table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A left-aligned text table."""
    rows = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def print_json(doc) -> None:
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False))


# -- the HTTP API (stdlib only) --------------------------------------------------------------------
_ERRORS_BY_CODE = {}
for _module in (errors, engine_errors, job_errors, trace_errors):
    for _name in dir(_module):
        _cls = getattr(_module, _name)
        if isinstance(_cls, type) and issubclass(_cls, TracebusError) and _cls is not TracebusError:
            _ERRORS_BY_CODE.setdefault(_cls.code, _cls)


class ApiClient:
    """Calls the tracebus HTTP API with urllib; error envelopes become library errors.

    Args:
        base_url(str): e.g. ``http://127.0.0.1:8000``.
        user(str | None): sent in ``user_header`` (ignored by an API that uses tokens).
        token(str | None): bearer token.
        user_header(str): the header naming the user (``TRACEBUS_USER_HEADER``).
        timeout_s(float): socket timeout of each request.
    """

    def __init__(self, base_url: str, user: str | None = None, token: str | None = None,
                 user_header: str = "X-User-Id", timeout_s: float = 60.0):
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise errors.ConfigError(f"--api must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.headers = {"Accept": "application/json"}
        if user:
            self.headers[user_header] = user
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.timeout_s = timeout_s

    def open(self, method: str, path: str, body: dict | None = None):
        """Send a request; returns the open response (2xx) or raises a TracebusError."""
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            raise self._error(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TracebusError(f"cannot reach the API at {self.base_url}: {reason}") from None

    def json(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """(status, decoded JSON body) of a request; the ``data`` of the original's envelope, in
        which the dashboard's routes answer (``TRACEBUS_API_DASHBOARD_ENVELOPE``)."""
        with self.open(method, path, body) as resp:
            doc = json.loads(resp.read() or b"{}")
        if isinstance(doc, dict) and doc.get("success") is True and "data" in doc:
            doc = doc["data"]
        return resp.status, doc

    def _error(self, e: urllib.error.HTTPError) -> TracebusError:
        try:
            err = json.loads(e.read() or b"{}").get("error") or {}
        except ValueError:
            err = {}
        code, message = err.get("code"), err.get("message") or f"HTTP {e.code} {e.reason}"
        cls = _ERRORS_BY_CODE.get(code, TracebusError)
        error = TracebusError.__new__(cls)
        TracebusError.__init__(error, f"{message} ({e.code} {code or e.reason})")
        return error
