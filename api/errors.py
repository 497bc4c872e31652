"""One JSON error envelope for every failure, mapped once with ``add_error_handler``.

Every error answer is ``{"error": {"code": "UPPER_SNAKE", "message": "what is wrong", ...}}``
(SPEC.md): the library's client errors carry their own ``code`` (and details such as
``cid_count``/``limit``) and :data:`STATUSES` says which HTTP status each class becomes (the
library knows nothing of HTTP), Falcon's own errors (unknown route, wrong method, bad
query parameter, 401) get a code derived from their status, Redis down is 503
``SERVICE_UNAVAILABLE`` with ``Retry-After``, Redis full (maxmemory reached) is 507
``REDIS_FULL`` with ``Retry-After``, and anything unexpected is logged with its
traceback and answered 500 ``INTERNAL_ERROR`` without one.
"""

from __future__ import annotations

import logging

import falcon

from tracebus.engine.errors import BrokerConnectionError, BrokerError, RedisFull
from tracebus.engine.outage import Outage
from tracebus.engine.redis_errors import redis_errors
from tracebus.errors import InvalidParams, TracebusError
from tracebus.jobs.export import FormatUnavailable
from tracebus.jobs.errors import (JobNotComplete, JobNotFound, JobResultExpired, JobStateConflict,
                                  QuotaExceeded)
from tracebus.trace.errors import (CacheExpired, CidLimitExceeded, CostLimitExceeded, NoDetectionRecords,
                                   QueryNotFound, SourceError)

log = logging.getLogger(__name__)

#: Codes of errors that Falcon raises itself, by HTTP status.
HTTP_CODES = {
    400: "INVALID_PARAMS", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE", 408: "REQUEST_TIMEOUT",
    411: "LENGTH_REQUIRED", 413: "PAYLOAD_TOO_LARGE", 414: "URI_TOO_LONG",
    415: "UNSUPPORTED_MEDIA_TYPE", 429: "TOO_MANY_REQUESTS", 431: "HEADERS_TOO_LARGE",
    503: "SERVICE_UNAVAILABLE",
}


#: HTTP status of each library error a client can cause (the most specific class wins);
#: any other library error is a bug, answered 500.
STATUSES: dict[type, int] = {
    InvalidParams: 400, JobNotFound: 404, JobResultExpired: 404, JobNotComplete: 409,
    JobStateConflict: 409, CacheExpired: 410, CidLimitExceeded: 413, CostLimitExceeded: 413, QuotaExceeded: 429,
    NoDetectionRecords: 404, QueryNotFound: 404, FormatUnavailable: 406,
}


def status_of(ex: TracebusError) -> int:
    """The HTTP status of ``ex``: that of its nearest class in :data:`STATUSES`, else 500."""
    for cls in type(ex).__mro__:
        if cls in STATUSES:
            return STATUSES[cls]
    return 500


def envelope(code: str, message: str, **details) -> dict:
    """The error body: ``{"error": {"code", "message", **details}}``."""
    return {"error": {"code": code, "message": message, **details}}


def _json_safe(details: dict) -> dict:
    return {k: v for k, v in details.items() if isinstance(v, (str, int, float, bool, type(None)))}


class ErrorHandlers:
    """The app's error handlers.

    Args:
        retry_after_s(int): the ``Retry-After`` of a 503 (Redis or the source unreachable).
        probe: a call that raises while Redis is away (``client.ping``), asked during an
            outage only, to log its end.
    """

    def __init__(self, retry_after_s: int, probe=None):
        self.retry_after_s = retry_after_s
        # Redis away is logged once when it goes and once when it is back, not per request.
        self.outage = Outage("api", log)
        self.probe = probe

    def process_response(self, req, resp, resource, req_succeeded: bool) -> None:
        """Middleware hook: during an outage, after a request, ask Redis (at the backoff's pace)
        whether it is back, so that its return is logged once."""
        if not self.outage.down or self.probe is None:
            return
        if str(resp.status).startswith("503"):  # it just asked Redis (or the source) itself: a
            return                              # probe would only add its wait to the answer
        try:
            with redis_errors():
                self.probe()
        except BrokerConnectionError as e:
            self.outage.failed(e)
            return
        except BrokerError:
            pass  # it answered, if only to refuse
        self.outage.recovered()

    def install(self, app: falcon.App) -> None:
        """Register the handlers on ``app`` (Falcon picks the most specific class)."""
        app.add_error_handler(Exception, self.unexpected)
        app.add_error_handler(falcon.HTTPError, self.http_error)
        app.add_error_handler(TracebusError, self.tracebus_error)

    def tracebus_error(self, req: falcon.Request, resp: falcon.Response, ex: TracebusError,
                       params: dict) -> None:
        """Library errors: client errors keep their code and status; Redis down is 503, full 507."""
        if isinstance(ex, RedisFull):
            log.warning("%s %s: Redis is full: %s", req.method, req.path, ex)
            self._answer(resp, 507, envelope(ex.code, "Redis is full (maxmemory reached): no new data can "
                                                      "be stored until memory is freed; retry later"))
            resp.set_header("Retry-After", str(self.retry_after_s))
            return
        if isinstance(ex, (BrokerError, SourceError)):
            what = "the queue's Redis" if isinstance(ex, BrokerError) else "the event source"
            if isinstance(ex, BrokerConnectionError):
                if not self.outage.down:  # later ones: the probes after requests set the pace
                    self.outage.failed(ex)
            else:
                log.warning("%s %s: %s unavailable: %s", req.method, req.path, what, ex)
            code = "SERVICE_UNAVAILABLE" if isinstance(ex, BrokerError) else "SOURCE_UNAVAILABLE"
            self._answer(resp, 503, envelope(code, f"{what} is unavailable; retry later"))
            resp.set_header("Retry-After", str(self.retry_after_s))
            return
        status = status_of(ex)
        if status == 500:
            self.unexpected(req, resp, ex, params)
            return
        details = _json_safe(ex.details)
        body = envelope(ex.code, ex.message, **details)
        if isinstance(ex, JobNotComplete) and "status" in details:
            body["status"] = body["error"].pop("status")  # where the original dashboard put it
        self._answer(resp, status, body)
        if isinstance(ex, QuotaExceeded):
            resp.set_header("Retry-After", str(ex.retry_after_s))

    def http_error(self, req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError,
                   params: dict) -> None:
        """Falcon's own errors (404 route, 405, bad query parameter, 401) in the envelope."""
        status = ex.status_code
        if isinstance(ex, falcon.HTTPRouteNotFound):
            message = f"no route for {req.method} {req.path}"
        elif isinstance(ex, falcon.HTTPMethodNotAllowed):
            message = f"{req.method} is not allowed on {req.path}"
        else:
            message = ex.description or ex.title or f"HTTP {status}"
        self._answer(resp, status, envelope(HTTP_CODES.get(status, f"HTTP_{status}"), message))
        for name, value in (ex.headers or {}).items():
            resp.set_header(name, value)

    def unexpected(self, req: falcon.Request, resp: falcon.Response, ex: Exception,
                   params: dict) -> None:
        """A bug: log the traceback, answer 500 without it."""
        log.error("%s %s failed", req.method, req.path, exc_info=ex)
        self._answer(resp, 500, envelope("INTERNAL_ERROR", "internal error; it has been logged"))

    @staticmethod
    def _answer(resp: falcon.Response, status: int, body: dict) -> None:
        resp.status = status
        resp.media = body
        resp.stream = None
        resp.text = None
