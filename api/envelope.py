"""The original dashboard's response envelope: on the dashboard's routes by default, elsewhere an option.

The original answers ``{"success": true, "data": ..., "meta": {"timestamp", "app_version"}}``
and ``{"success": false, "error": {"code", "message"}, "meta": {...}}`` (core/response.py),
and some of its clients read ``payload.data``. With the option on, :class:`Envelope` wraps
every JSON answer after the resource (or the error handler) has produced it:

* a ``resp.media`` body: success bodies become ``data``; an error body keeps its ``error``
  object and its other top-level fields move into ``meta`` (the original's
  ``meta.job_status`` of a 409, ``meta.retry_after_seconds`` of a 429);
* a streamed JSON body (the synchronous trace, the full result): the stream is wrapped
  without reading it, so memory stays at one chunk; so is a JSON body already encoded
  (``resp.data`` with ``resp.context.json_data``: :meth:`api.offloop.OffLoop.answer`).

Other streams (NDJSON, server-sent events, CSV, Prometheus text) are not JSON documents
and pass unchanged, as do the answers of resources with ``enveloped = False`` (the probes
and the OpenAPI document: their readers expect them bare).

Resources with ``enveloped = "always"`` (the ``/api/mid-section-defect/*``, ``/api/job/*`` and
``/api/query-tool/*`` routes, whose pages read ``result.data``: MSD.md section 7) are wrapped
even with the option off, so the middleware is always installed and told whether to wrap the
others (``everywhere``). Resources with ``enveloped = "dashboard"`` (``/api/trace/*``: the
query-tool page's lineage composables read ``payload.data`` and nothing else, as the original
wraps every route there) are wrapped unless ``TRACEBUS_API_DASHBOARD_ENVELOPE=0``, which leaves
them to ``TRACEBUS_API_ENVELOPE`` (``dashboard``). A resource may put extra ``meta`` fields in
``resp.context.envelope_meta`` (the filter options' ``updated_at`` and ``schema_version``).
"""

from __future__ import annotations

import datetime
from importlib import metadata
from typing import Iterable, Iterator

import falcon
import orjson


def app_version() -> str:
    """The installed tracebus version ("unknown" when not installed as a package)."""
    try:
        return metadata.version("tracebus")
    except metadata.PackageNotFoundError:
        return "unknown"


def meta(version: str, **extra) -> dict:
    """``{"timestamp": <ISO 8601, local time with offset>, "app_version", **extra}``."""
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return {"timestamp": now, "app_version": version, **extra}


def wrap(body, status: int, version: str, extra_meta: dict | None = None) -> dict:
    """The enveloped form of a JSON body answered with HTTP ``status`` (``extra_meta``: success only)."""
    if status >= 400 and isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = dict(body["error"])
        extra = {("job_status" if k == "status" else k): v for k, v in body.items() if k != "error"}
        if "retry_after_seconds" in error:
            extra["retry_after_seconds"] = error["retry_after_seconds"]
        return {"success": False, "error": error, "meta": meta(version, **extra)}
    return {"success": True, "data": body, "meta": meta(version, **(extra_meta or {}))}


def wrap_stream(chunks: Iterable[bytes], version: str) -> Iterator[bytes]:
    """A streamed JSON document as the ``data`` of a success envelope."""
    yield b'{"success":true,"data":'
    yield from chunks
    yield b',"meta":' + orjson.dumps(meta(version)) + b"}"


def _is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == falcon.MEDIA_JSON


class Envelope:
    """Falcon middleware wrapping JSON answers (install it first, so it runs last).

    Args:
        version(str): ``meta.app_version``.
        everywhere(bool): wrap every resource's answers (``TRACEBUS_API_ENVELOPE=1``); when
            False only those of resources with ``enveloped = "always"``, and with ``dashboard``
            those with ``enveloped = "dashboard"``.
        dashboard(bool): wrap the dashboard's trace routes (``TRACEBUS_API_DASHBOARD_ENVELOPE``).
    """

    def __init__(self, version: str | None = None, everywhere: bool = True, dashboard: bool = True):
        self.version = version or app_version()
        self.everywhere = everywhere
        self.dashboard = dashboard

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        mode = True if resource is None else getattr(resource, "enveloped", True)
        if mode == "dashboard":
            mode = "always" if self.dashboard else True
        if not mode or (mode != "always" and not self.everywhere):
            return
        if resp.stream is not None:
            if _is_json(resp.content_type):
                resp.stream = wrap_stream(resp.stream, self.version)
            return
        if resp.data is not None and getattr(resp.context, "json_data", False):  # JSON encoded off the loop
            resp.data = b"".join(wrap_stream((resp.data,), self.version))
            return
        if resp.text is None and resp.data is None and resp.media is not None:
            extra = getattr(resp.context, "envelope_meta", None)
            resp.media = wrap(resp.media, resp.status_code, self.version, extra)
