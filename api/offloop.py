"""Answers computed in the request, off the gevent loop: on a small thread pool of their own.

A synchronous answer (equipment-period under 30 days, seed-resolve, lineage, the synchronous
trace, the MSD lookups) reads the database in the request. SQLite is C code that never
yields to gevent, and building the answer is Python that does not either: run on the worker's
event loop, one 40 s request froze every other connection of the worker. Here that work runs
on a native thread pool of ``TRACEBUS_API_SYNC_THREADS`` threads per API worker (its bound:
more such requests wait their turn, cooperatively), while the loop keeps serving the others.
SQLite releases the GIL while it steps a statement; the worker's switch interval is shortened
(:data:`SWITCH_INTERVAL_S`, set at worker start) so that the loop gets the GIL back quickly from
a thread that is building rows in Python.

The answer's JSON is encoded there too (:meth:`OffLoop.answer`), and a stored lineage packed
and unpacked, each in pieces (:mod:`tracebus.trace.pieces`: orjson and msgpack hold the GIL for
a whole call, so one call over megabytes would stop the loop all the same). Only source reads
and pure computation go to the pool, never a Redis call: the API's Redis connections belong to
the loop's thread. Without gevent (gthread workers, the test client)
the work runs in the calling thread, as before.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import falcon

from tracebus.trace import pieces

#: The interpreter's switch interval in a gevent worker (the default is 5 ms): how long the
#: loop may wait for the GIL held by a thread of the pool.
SWITCH_INTERVAL_S = 0.001

_END = object()


def _patched() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency of the API
        return False
    return monkey.is_module_patched("threading")


class OffLoop:
    """Runs calls and iterations on the worker's pool (created on first use, in each process).

    Args:
        threads(int): the pool's size, the most answers computed at once by one API worker.
    """

    def __init__(self, threads: int):
        self.threads = threads
        self._pool = None
        self._pid: int | None = None

    def _get(self):
        if not _patched():
            return None
        if self._pool is None or self._pid != os.getpid():
            from gevent.threadpool import ThreadPool

            self._pool, self._pid = ThreadPool(self.threads), os.getpid()
        return self._pool

    def call(self, fn: Callable, *args) -> Any:
        """``fn(*args)`` on the pool; the calling greenlet waits, others run (errors re-raised here)."""
        pool = self._get()
        return fn(*args) if pool is None else pool.apply(fn, args)

    def answer(self, resp: falcon.Response, answer: Any) -> None:
        """Set ``answer`` as the JSON body, encoded on the pool (a lineage tree is megabytes);
        :class:`api.envelope.Envelope` wraps such a body as it wraps ``resp.media``."""
        resp.data = self.call(pieces.json_bytes, answer)
        resp.content_type = falcon.MEDIA_JSON
        resp.context.json_data = True

    def iterate(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """``chunks``, each one made on the pool (a streamed body: the synchronous trace)."""
        pool = self._get()
        if pool is None:
            return chunks

        def pulled() -> Iterator[bytes]:
            try:
                while (chunk := pool.apply(next, (chunks, _END))) is not _END:
                    yield chunk
            finally:
                close = getattr(chunks, "close", None)
                try:
                    if close is not None:
                        close()
                except ValueError:  # still running on the pool (this greenlet was killed): it ends there
                    pass

        return pulled()
