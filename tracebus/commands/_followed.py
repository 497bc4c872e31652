"""``tracebus fetch --follow``'s NDJSON file made into the bytes ``GET /stream`` sends for the ended job.

Not a command. A followed stream differs from the finished job's stream in two places only
(README, "the result on the wire"): a domain still running when its turn came starts with
``domain_start.total: null``, and a domain that failed is sent with the rows it had
(``domain_end{failed: true}``) where the finished job's stream leaves it out. The rows, their
order and batches, and every other line are the same. :class:`Settle` notes, while the file
is written, where those lines sit; once the ``complete`` line came, :meth:`Settle.apply`
copies the file once with each null total filled in from its ``domain_end`` count and each
failed domain cut out, so the saved file does not depend on when the fetch started.
"""

from __future__ import annotations

import os

import orjson

from tracebus.jobs import wire

#: Bytes copied per read when the file is rewritten.
COPY_BYTES = 1 << 20


class Settle:
    """The edits a followed NDJSON file needs: (offset, length, replacement bytes), in file order."""

    def __init__(self):
        self.edits: list[tuple[int, int, bytes]] = []
        self._open: dict[str, tuple[int, dict, int]] = {}  # domain -> (offset, its domain_start, length)

    def note(self, message: dict, offset: int, length: int) -> None:
        """See one written line: ``message`` (the wire map), at ``offset`` of the file, ``length`` bytes."""
        kind = message.get("type")
        if kind == "domain_start" and message.get("total") is None:
            self._open[message["domain"]] = (offset, message, length)
        elif kind == "domain_end" and message.get("domain") in self._open:
            start, head, head_length = self._open.pop(message["domain"])
            if message.get("failed"):
                self.edits.append((start, offset + length - start, b""))
            else:
                line = orjson.dumps(wire.expand({**head, "total": message["count"]}),
                                    option=orjson.OPT_APPEND_NEWLINE)
                self.edits.append((start, head_length, line))

    def apply(self, path: str) -> None:
        """Rewrite ``path`` with the edits (nothing to do when there are none).

        Raises:
            OSError: the copy cannot be written (the original is left as it was).
        """
        if not self.edits:
            return
        tmp = path + ".settle"
        try:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                at = 0
                for offset, length, replacement in self.edits:
                    _copy(src, dst, offset - at)
                    dst.write(replacement)
                    src.seek(offset + length)
                    at = offset + length
                _copy(src, dst, None)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _copy(src, dst, n: int | None) -> None:
    """Copy ``n`` bytes (None: the rest) from ``src``'s position."""
    while n is None or n > 0:
        block = src.read(COPY_BYTES if n is None else min(n, COPY_BYTES))
        if not block:
            return
        dst.write(block)
        if n is not None:
            n -= len(block)
