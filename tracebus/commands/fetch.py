"""``tracebus fetch JOB --out FILE [--format ndjson|msgpack|parquet|arrow|csv] [--domain D] [--follow] [--api URL]``: save a job's result.

The result is read in the binary wire format (the stored chunks as they are; through the
HTTP API with ``Accept: application/vnd.msgpack``, or through the library), so the server
does not turn it into JSON. It is written as NDJSON (the same bytes ``GET /stream`` would
send: meta, per-domain records batches, complete) or, with ``--format msgpack``, as the
binary stream itself. ``--follow`` starts while the job runs and saves chunks as units
commit; an NDJSON file is still the bytes ``GET /stream`` sends once the job has ended (a
domain's ``total``, null while it ran, is filled in and a failed domain is left out), while
stdout and ``--format msgpack`` get the followed stream as it came. Progress (rows, bytes,
rate) goes to stderr. The file is written as ``FILE.part`` and renamed to FILE only once
the ``complete`` line arrived, so a file that exists is whole. ``--out -`` writes to stdout.

``--format parquet|arrow|csv`` saves one domain (``--domain``; may be left out when the job
has one) of a completed job as typed Parquet, an Arrow IPC stream or CSV, as
``GET /api/v1/jobs/{id}/export`` writes it (:mod:`tracebus.jobs.export`); Parquet and Arrow
need pyarrow where the file is made (``pip install 'tracebus[arrow]'``).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from typing import Iterable, Iterator

import orjson

from tracebus.errors import InvalidParams, TracebusError
from tracebus.commands._common import ApiClient, fmt_bytes, open_service
from tracebus.commands._followed import Settle
from tracebus.jobs import wire
from tracebus.jobs.states import FINAL_STATES, JobState
from tracebus.trace import ndjson

#: Bytes asked of the socket per read.
READ_BYTES = 256 * 1024
#: The formats of one domain, written by the export (not the wire stream).
EXPORTS = ("parquet", "arrow", "csv")


def add_parser(sub) -> None:
    p = sub.add_parser("fetch", help="save a job's result to a file (NDJSON, msgpack; one domain as Parquet, Arrow or CSV)",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.add_argument("job_id", metavar="JOB")
    p.add_argument("--out", "-o", required=True, metavar="FILE",
                   help="where to write the result ('-': stdout)")
    p.add_argument("--format", choices=("ndjson", "msgpack") + EXPORTS, default="ndjson",
                   help="ndjson (default): the lines of GET /stream; msgpack: the binary stream as received; "
                        "parquet, arrow, csv: one domain (--domain), typed")
    p.add_argument("--domain", help="with --format parquet|arrow|csv: the domain to save (default: the "
                                    "job's only one)")
    p.add_argument("--follow", action="store_true", help="start while the job runs; end when it ends")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--api", metavar="URL", help="go through the HTTP API at URL instead of the library")
    p.add_argument("--user", default=None, help="with --api: ask as this user (default: none sent; the API names the caller, as the page)")
    p.add_argument("--token", help="bearer token for --api")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    progress = Progress(args.job_id, sys.stderr, quiet=args.quiet)
    if args.format in EXPORTS:
        return _export(args, settings, progress)
    if args.domain:
        raise InvalidParams("--domain goes with --format parquet, arrow or csv")
    if args.api:
        api = ApiClient(args.api, user=args.user, token=args.token,
                        user_header=settings.user_header, timeout_s=300)
        path = f"/api/trace/job/{urllib.parse.quote(args.job_id)}"
        doc = api.json("GET", path)[1]
        if doc.get("status") in (JobState.COMPLETED, JobState.FAILED):  # a running job's rows are not its total
            progress.expected = doc.get("progress_detail", {}).get("rows")
        api.headers["Accept"] = wire.CONTENT_TYPE
        with api.open("GET", path + "/stream" + ("?follow=1" if args.follow else "")) as resp:
            return _save(_blocks(resp), args, progress)
    broker, service = open_service(settings)
    try:
        doc = service.status(args.job_id)
        if doc["state"] in FINAL_STATES:  # a running job's rows are not its total
            progress.expected = doc["progress"]["rows"]
        return _save(service.stream(args.job_id, encoding=ndjson.BINARY, follow=args.follow), args, progress)
    finally:
        broker.close()


def _export(args, settings, progress: "Progress") -> int:
    """One domain as Parquet, Arrow or CSV, through the API's export or the library's."""
    if args.follow:
        raise InvalidParams(f"--follow does not go with --format {args.format}: the export is of a completed job")
    if args.api:
        api = ApiClient(args.api, user=args.user, token=args.token,
                        user_header=settings.user_header, timeout_s=300)
        query = urllib.parse.urlencode({"format": args.format, **({"domain": args.domain} if args.domain else {})})
        with api.open("GET", f"/api/v1/jobs/{urllib.parse.quote(args.job_id)}/export?{query}") as resp:
            return _save_export(_blocks(resp), args, progress)
    broker, service = open_service(settings)
    try:
        return _save_export(service.export(args.job_id, args.domain, args.format), args, progress)
    except InvalidParams as e:
        if args.domain is None and str(e).startswith("a domain is required"):
            raise InvalidParams(f"--domain is required: {str(e).partition(': ')[2]}") from None
        raise
    finally:
        broker.close()


def _save_export(blocks: Iterable[bytes], args, progress: "Progress") -> int:
    """Write the export's bytes to FILE.part, renamed to FILE once they all came."""
    progress.counts_rows = False
    out = args.out
    target = sys.stdout.buffer if out == "-" else None
    part = out + ".part"
    try:
        with (open(part, "wb") if target is None else _Unclosed(target)) as f:
            for block in blocks:
                f.write(block)
                progress.received += len(block)
                progress.update()
        progress.close()
        if target is None:
            os.replace(part, out)
    except OSError as e:
        raise TracebusError(f"cannot write {out}: {e.strerror}") from None
    finally:
        if target is None and os.path.exists(part):
            os.unlink(part)
    seconds = max(time.monotonic() - progress.started, 1e-3)
    print(f"wrote {args.format} of {args.domain or 'the job'} ({progress.received:,} bytes) to "
          f"{'stdout' if out == '-' else out} in {seconds:.1f} s", file=sys.stderr)
    return 0


class _Unclosed:
    """stdout as a context manager that leaves it open."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self.f

    def __exit__(self, *exc):
        self.f.flush()


def _blocks(resp) -> Iterator[bytes]:
    while block := resp.read1(READ_BYTES):
        yield block


def _save(blocks: Iterable[bytes], args, progress: "Progress") -> int:
    out = args.out
    if out == "-":
        last, written = _copy(blocks, sys.stdout.buffer, args.format, progress)
        return _verdict(last, written, "stdout", progress)
    part = out + ".part"
    settle = Settle() if args.format == "ndjson" else None
    try:
        with open(part, "wb") as f:
            last, written = _copy(blocks, f, args.format, progress, settle)
        if last.get("type") == "complete" and settle is not None:
            settle.apply(part)
            written = os.path.getsize(part)
        code = _verdict(last, written, out, progress)
        if code == 0:
            os.replace(part, out)
        return code
    except OSError as e:
        raise TracebusError(f"cannot write {out}: {e.strerror}") from None
    finally:
        if os.path.exists(part):
            os.unlink(part)


def _copy(blocks: Iterable[bytes], f, fmt: str, progress: "Progress",
          settle: Settle | None = None) -> tuple[dict, int]:
    """Write every message; returns (the last message, bytes written). ``settle`` notes where
    each NDJSON line went (a followed file is settled after its ``complete`` line)."""
    reader, last, written = wire.FrameReader(), {}, 0
    try:
        for block in blocks:
            progress.received += len(block)
            if fmt == "msgpack":
                f.write(block)
                written += len(block)
            for message in reader.feed(block):
                last = message
                if message["type"] == "records":
                    progress.rows += message["count"]
                elif message["type"] == "complete":  # the total, known at last (--follow)
                    progress.expected = message["total_records"]
                if fmt == "ndjson":
                    data = orjson.dumps(wire.expand(message), option=orjson.OPT_APPEND_NEWLINE)
                    f.write(data)
                    if settle is not None:
                        settle.note(message, written, len(data))
                    written += len(data)
            progress.update()
        reader.close()
    except ValueError as e:  # a cut or corrupt body: the verdict says the result is incomplete
        last = {"type": "error", "message": str(e)}
    finally:
        progress.close()
    return last, written


def _verdict(last: dict, written: int, where: str, progress: "Progress") -> int:
    if last.get("type") == "complete":
        seconds = max(time.monotonic() - progress.started, 1e-3)
        print(f"wrote {last['total_records']:,} records ({written:,} bytes) to {where} "
              f"({fmt_bytes(progress.received)} received in {seconds:.1f} s)", file=sys.stderr)
        return 0
    reason = last.get("message") if last.get("type") == "error" else "the stream ended early"
    print(f"tracebus: result incomplete: {reason}", file=sys.stderr)
    return 1


class Progress:
    """Rows and bytes received, on one line of ``stream``: redrawn on a terminal, else a line
    every ``every_s`` seconds."""

    def __init__(self, job_id: str, stream, quiet: bool = False, every_s: float = 5.0):
        self.job_id, self.stream, self.quiet = job_id, stream, quiet
        self.tty = stream.isatty()
        self.every_s = 0.2 if self.tty else every_s
        self.expected: int | None = None
        self.rows = self.received = 0
        self.counts_rows = True  # an export's bytes are not counted in rows
        self.started = self.drawn_at = time.monotonic()
        self.width = 0

    def render(self) -> str:
        seconds = max(time.monotonic() - self.started, 1e-3)
        of = f"/{self.expected:,}" if self.expected else ""
        share = f" ({min(100, 100 * self.rows // self.expected)}%)" if self.expected else ""
        rows = f"{self.rows:,}{of} rows{share}  " if self.counts_rows else ""
        return f"{self.job_id}: {rows}{fmt_bytes(self.received)}  {fmt_bytes(int(self.received / seconds))}/s"

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or (not force and now - self.drawn_at < self.every_s):
            return
        self.drawn_at = now
        line = self.render()
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.update(force=True)
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
