"""Streamed response bodies: generators handed to the WSGI server chunk by chunk.

A body is a generator of ``bytes`` set as ``resp.stream``; gunicorn writes each chunk as
it comes (chunked transfer encoding), so memory stays at one chunk, and calls ``close()``
when the client goes away, which closes the generator (and the source cursor or Redis
read behind it). Errors raised before the first chunk still become a proper error
answer; see :func:`primed`.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Iterable, Iterator

import falcon

log = logging.getLogger(__name__)

#: Headers of every streamed body: no caching, no proxy buffering (nginx).
NO_BUFFERING = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def guarded(chunks: Iterable[bytes], what: str) -> Iterator[bytes]:
    """Yield ``chunks``; log a failure after the headers went out, then let it abort the
    connection (the status is already sent, so a truncated body is the honest signal)."""
    try:
        for chunk in chunks:
            yield chunk
            # Under the gevent worker, let the worker's other connections run between chunks:
            # making a chunk may be C code that never yields (SQLite's fetchmany for a
            # synchronous trace). Patched, sleep(0) is gevent.sleep(0); with threads, a no-op.
            time.sleep(0)
    except GeneratorExit:
        raise
    except Exception as e:
        log.error("%s failed mid-stream (%s: %s); the response is cut short", what, type(e).__name__, e)
        raise


def primed(chunks: Iterator[bytes], head: int) -> Iterator[bytes]:
    """Pull the first ``head`` chunks now, inside the request handler, so that setup errors
    (the source cannot be opened, its first query fails) still map to an error status; then
    stream the rest.

    Args:
        chunks(Iterator[bytes]): the body generator.
        head(int): chunks to pull up front (memory: these chunks only).
    """
    first = list(itertools.islice(chunks, head))

    def rest() -> Iterator[bytes]:
        try:
            yield from first
            yield from chunks
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    return rest()


def stream(resp: falcon.Response, body: Iterable[bytes], content_type: str, what: str) -> None:
    """Set ``body`` as the streamed response with :data:`NO_BUFFERING` headers."""
    resp.content_type = content_type
    resp.set_headers(NO_BUFFERING)
    resp.stream = guarded(body, what)
