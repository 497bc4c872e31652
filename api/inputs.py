"""Reading request input: the JSON body (size-capped) and query parameters.

A query string is declared once (:class:`tracebus.jobs.shapes.Query`): :func:`query` reads and
checks it, and the OpenAPI document lists its parameters from the same fields. Malformed input
raises :class:`tracebus.errors.InvalidParams` (or Falcon's own 400/413), with a message that says
what is wrong; :mod:`api.errors` turns it into the envelope.
"""

from __future__ import annotations

import socket
import time

import falcon
import orjson

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Int, Limits
from tracebus.jobs.shapes import Query


def read_json(req: falcon.Request, max_bytes: int):
    """The request body parsed as JSON (any Content-Type: curl's ``-d`` sends form-encoded).

    Raises:
        falcon.HTTPContentTooLarge: the body is larger than ``max_bytes``.
        InvalidParams: the body is empty, not UTF-8, not JSON, or nested absurdly deep.
    """
    length = req.content_length
    if length is not None and length > max_bytes:
        raise falcon.HTTPContentTooLarge(
            description=f"request body is {length} bytes; the limit is {max_bytes}")
    raw = _read_body(req, max_bytes + 1)
    if len(raw) > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"request body exceeds {max_bytes} bytes")
    if not raw.strip():
        raise InvalidParams("request body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8-sig")  # JSON is UTF-8 (RFC 8259); a BOM is tolerated
    except UnicodeDecodeError:
        raise InvalidParams("request body is not UTF-8 text") from None
    try:
        # orjson, not json: json.loads lets a lone surrogate ("\ud800") through as a str that
        # no encoder can write back (a 500 further on); orjson refuses it here, as invalid
        # Unicode, and refuses nesting deeper than 1024 too.
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        if str(e).startswith("depth limit"):
            raise InvalidParams("request body is nested too deeply") from None
        raise InvalidParams(f"request body is not valid JSON: {e}") from None


def _read_body(req: falcon.Request, limit: int) -> bytes:
    """Up to ``limit`` bytes of the body, within ``TRACEBUS_API_BODY_TIMEOUT_S`` in all.

    A client that sends fewer bytes than its Content-Length and then nothing held the
    connection for good (and a graceful stop waited for it): under gunicorn the socket's
    timeout is set to what is left of the deadline for each read, and a stall is 408 with
    ``Connection: close`` (the rest of the body will never be read).

    Raises:
        falcon.HTTPError: 408 past the deadline.
    """
    sock = req.env.get("gunicorn.socket")
    timeout_s = getattr(req.context, "body_timeout_s", None)
    if sock is None or timeout_s is None:  # not under gunicorn (tests' simulated requests)
        return req.bounded_stream.read(limit)
    deadline, chunks, total = time.monotonic() + timeout_s, [], 0
    previous = sock.gettimeout()
    try:
        while total < limit:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout
            sock.settimeout(left)
            chunk = req.bounded_stream.read(min(64 * 1024, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except (socket.timeout, TimeoutError):
        raise falcon.HTTPError(408, description=f"the request body did not arrive within {timeout_s} s "
                                                f"(TRACEBUS_API_BODY_TIMEOUT_S)",
                               headers={"Connection": "close"}) from None
    finally:
        sock.settimeout(previous)
    return b"".join(chunks)


class BodyDeadline:
    """Falcon middleware giving :func:`read_json` its deadline (``TRACEBUS_API_BODY_TIMEOUT_S``)."""

    def __init__(self, timeout_s: int):
        self.timeout_s = timeout_s

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.body_timeout_s = self.timeout_s


#: Largest accepted ``offset`` (it is echoed back as a JSON integer): no result has more rows
#: than a 63-bit count; larger offsets are typos, not pages.
MAX_OFFSET = 2**63 - 1


#: ``offset`` of a paged list: its first item.
OFFSET = Int("offset", minimum=0, maximum=MAX_OFFSET, default=0, description="first row")


def query(req: falcon.Request, declared: Query, limits: Limits = {}) -> dict:
    """The declared parameters of the request's query string, checked (:meth:`~tracebus.jobs.shapes.Query.read`;
    its OpenAPI parameters are :meth:`~tracebus.jobs.shapes.Query.parameters`).

    Args:
        limits: the bounds a declaration names (settings).

    Raises:
        InvalidParams: with the message the first wrong parameter's declaration carries.
    """
    return declared.read(query_values(req), limits)


def query_values(req: falcon.Request):
    """``values(name)``: the values the query string gives ``name``, in order (``[]``: absent)."""
    return lambda name: req.get_param_as_list(name) or []


def wants_fresh(req: falcon.Request) -> bool:
    """True when the request asks to run again rather than be answered from a stored result:
    ``Cache-Control: no-cache`` (RFC 9111: the stored answer must not be used without the origin)."""
    value = req.get_header("Cache-Control") or ""
    return any(token.strip().lower() == "no-cache" for token in value.split(","))
