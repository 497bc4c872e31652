"""``tracebus fetch JOB --out FILE.ndjson [--api URL]``: stream a finished job's result to a file.

The NDJSON result (meta, per-domain records batches, complete) is copied chunk by chunk,
through the library or the HTTP API (``GET /api/trace/job/{id}/stream``), into
``FILE.part``, renamed to FILE only once the ``complete`` line arrived, so a file that
exists is whole. ``--out -`` writes to stdout.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
import urllib.parse
from typing import Iterable

from tracebus.errors import TracebusError
from tracebus.commands._common import ApiClient, open_service


def add_parser(sub) -> None:
    p = sub.add_parser("fetch", help="stream a finished job's result (NDJSON) to a file",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.add_argument("job_id", metavar="JOB")
    p.add_argument("--out", "-o", required=True, metavar="FILE",
                   help="where to write the NDJSON ('-': stdout)")
    p.add_argument("--api", metavar="URL", help="go through the HTTP API at URL instead of the library")
    p.add_argument("--user", default=None, help="with --api: ask as this user (default: your login name)")
    p.add_argument("--token", help="bearer token for --api")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    if args.api:
        api = ApiClient(args.api, user=args.user or getpass.getuser(), token=args.token,
                        user_header=settings.user_header, timeout_s=300)
        with api.open("GET", f"/api/trace/job/{urllib.parse.quote(args.job_id)}/stream") as resp:
            return _save(resp, args.out)
    broker, service = open_service(settings)
    try:
        return _save(service.stream(args.job_id), args.out)
    finally:
        broker.close()


def _save(lines: Iterable[bytes], out: str) -> int:
    if out == "-":
        total, written, last = _copy(lines, sys.stdout.buffer)
        return _verdict(last, total, written, "stdout")
    part = out + ".part"
    try:
        with open(part, "wb") as f:
            total, written, last = _copy(lines, f)
        code = _verdict(last, total, written, out)
        if code == 0:
            os.replace(part, out)
        return code
    except OSError as e:
        raise TracebusError(f"cannot write {out}: {e.strerror}") from None
    finally:
        if os.path.exists(part):
            os.unlink(part)


def _copy(lines: Iterable[bytes], f) -> tuple[int | None, int, bytes]:
    """Copy every line; returns (total_records of the complete line, bytes, last line)."""
    written, last = 0, b""
    for line in lines:
        f.write(line)
        written += len(line)
        if line.strip():
            last = line
    total = None
    if last.startswith(b'{"type":"complete"'):
        total = json.loads(last).get("total_records")
    return total, written, last


def _verdict(last: bytes, total: int | None, written: int, where: str) -> int:
    if total is not None:
        print(f"wrote {total:,} records ({written:,} bytes) to {where}", file=sys.stderr)
        return 0
    try:
        error = json.loads(last) if last else {}
    except ValueError:
        error = {}
    reason = error.get("message") if error.get("type") == "error" else "the stream ended early"
    print(f"tracebus: result incomplete: {reason}", file=sys.stderr)
    return 1
