"""gunicorn's own error answers (400 bad request line, 414 line too long, 431 headers too
large...), written before the app sees the request, as the API's JSON error envelope
instead of gunicorn's HTML page. gunicorn has no setting for their body: its workers call
``gunicorn.util.write_error``, which ``api/gunicorn.conf.py`` replaces with :func:`write_error`.
"""

from __future__ import annotations

import json

from api.errors import HTTP_CODES, envelope

#: The longest request line gunicorn reads (its most, against its default 4094): every query
#: parameter has a bounded length, and this leaves room for all of them at once, URL-encoded;
#: longer is its 414. ``api/gunicorn.conf.py`` sets it, and the OpenAPI document states it.
MAX_REQUEST_LINE = 8190
#: The most header fields, and the longest one, gunicorn reads (its defaults, set explicitly);
#: past either: its 431.
MAX_HEADER_FIELDS = 100
MAX_HEADER_FIELD_BYTES = 8190


def write_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """Write ``status_int`` with a JSON body (same signature as gunicorn's)."""
    from gunicorn.util import write_nonblock

    code = HTTP_CODES.get(status_int, f"HTTP_{status_int}")
    body = json.dumps(envelope(code, mesg or reason)).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    write_nonblock(sock, head + body)
