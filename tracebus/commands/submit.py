"""``tracebus submit --profile P --domains ... --cids-file F [--wait] [--api URL]``: run a trace job.

Submits through the library (straight to Redis, as the API would) or, with ``--api``,
through the HTTP API. Prints the job id; with ``--wait`` it shows a live progress bar on
stderr (units, rows, rate, elapsed, ETA; as wide as the terminal) until the job ends, says
when no worker serves the queue (and again while none does), then prints a summary. Exit code 0 when
the job completed in full, 1 when it failed, was cancelled or some domains failed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from tracebus.engine.registry import WorkerRegistry
from tracebus.errors import ConfigError
from tracebus.commands._common import ApiClient, fmt_duration, open_service, print_json
from tracebus.jobs.states import JobState
from tracebus.trace.owners import ANONYMOUS_PREFIX
from tracebus.trace.states import V1_FINAL

#: The caller the monitor page opened on this machine is (no token, no trusted proxy): the
#: library path submits as it by default, so the page and the API list the job.
LOCAL_CALLER = ANONYMOUS_PREFIX + "127.0.0.1"

#: Public statuses after which a job does not change any more.
FINAL = V1_FINAL


def add_parser(sub) -> None:
    p = sub.add_parser("submit", help="submit a trace job (and follow it with --wait)",
                       description=__doc__.split("\n\n", 1)[1].replace("\n", " "))
    p.add_argument("--profile", required=True, help="the request's profile (/openapi.json's TraceRequest lists them)")
    p.add_argument("--domains", required=True, nargs="+", metavar="DOMAIN",
                   help="domains to fetch (space- or comma-separated)")
    p.add_argument("--cids-file", required=True, metavar="FILE",
                   help="container ids, one per line (or comma-separated; '#' comments; '-': stdin)")
    p.add_argument("--params", default="{}", metavar="JSON", help="request params as a JSON object")
    p.add_argument("--user", default=None,
                   help="submit as this user (default: the caller the monitor page opened on this machine "
                        "is, anon:127.0.0.1 through the library; through --api, who the API takes you for)")
    p.add_argument("--api", metavar="URL", help="go through the HTTP API at URL instead of the library")
    p.add_argument("--token", help="bearer token for --api (when the API uses tokens)")
    p.add_argument("--fresh", action="store_true",
                   help="run the query again even when an identical request's result is stored "
                        "(Cache-Control: no-cache through --api)")
    p.add_argument("--wait", action="store_true", help="follow the job with a progress bar until it ends")
    p.add_argument("--interval", type=float, default=0.5, metavar="SECONDS",
                   help="progress refresh period with --wait (default 0.5)")
    p.add_argument("--json", action="store_true", help="print the submit answer / final status as JSON")
    p.set_defaults(func=run)


def read_cids(path: str) -> list[str]:
    """Container ids from a file (``-``: stdin): whitespace or comma separated, ``#`` comments.

    Raises:
        ConfigError: the file cannot be read or holds no id.
    """
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--cids-file: cannot read {path}: {e.strerror}") from None
    cids = [c for line in text.splitlines() for c in line.split("#", 1)[0].replace(",", " ").split()]
    if not cids:
        raise ConfigError(f"--cids-file: no container ids in {path}")
    return cids


def _body(args) -> dict:
    try:
        params = json.loads(args.params)
    except ValueError as e:
        raise ConfigError(f"--params is not JSON: {e}") from None
    domains = [d for item in args.domains for d in item.split(",") if d.strip()]
    return {"profile": args.profile, "domains": [d.strip() for d in domains],
            "container_ids": read_cids(args.cids_file), "params": params}


def run(args, settings) -> int:
    if args.interval <= 0:
        raise ConfigError("--interval must be positive")
    body = _body(args)
    if args.api:  # no user header unless asked: the API names the caller as it names the page
        return _via_api(args, settings, body, args.user)
    user = args.user or LOCAL_CALLER
    broker, service = open_service(settings)
    try:
        req = service.parse(body, user)
        if args.fresh:
            req = replace(req, fresh=True)
        job_id = service.submit(req)
        answer = {"job_id": job_id, "async": True, "estimated_seconds": service.estimated_seconds(req)}
        registry = WorkerRegistry(broker)
        serving = lambda: sum(settings.queue in (w.get("queues") or "").split(",")  # noqa: E731
                              for w in registry.list())
        return _follow(args, answer, lambda: service.status(job_id), serving, settings.queue,
                       settings.submit_no_worker_repeat_s)
    finally:
        broker.close()


def _via_api(args, settings, body: dict, user: str | None) -> int:
    api = ApiClient(args.api, user=user, token=args.token, user_header=settings.user_header)
    if args.fresh:
        api.headers["Cache-Control"] = "no-cache"
    status, answer = api.json("POST", "/api/trace/events", body)
    if status == 200:  # at or below TRACE_ASYNC_CID_THRESHOLD the API answers with the rows
        counts = {d: r.get("count", len(r.get("data", ()))) for d, r in (answer.get("results") or {}).items()}
        if args.json:
            print_json({"async": False, "counts": counts})
        else:
            print("answered synchronously (the API's async threshold was not reached): "
                  + ", ".join(f"{d} {n} rows" for d, n in counts.items()))
        return 0
    job_id = answer["job_id"]
    return _follow(args, answer, lambda: api.json("GET", f"/api/trace/job/{job_id}")[1],
                   lambda: _ready_workers(api), settings.queue, settings.submit_no_worker_repeat_s)


def _ready_workers(api: ApiClient) -> int | None:
    """Live workers on the trace queue, as the API's /readyz counts them (None: unknown)."""
    request = urllib.request.Request(api.base_url + "/readyz", headers=api.headers)
    try:
        with urllib.request.urlopen(request, timeout=api.timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:  # 503 when no worker reads the queue: the body says so
        body = e.read()
    except OSError:
        return None
    try:
        return int(json.loads(body).get("workers"))
    except (ValueError, TypeError, AttributeError):
        return None


class WorkerWatch:
    """Says on ``stream`` (through the bar) when no worker serves the queue, and again every
    ``repeat_s`` (``TRACE_SUBMIT_NO_WORKER_REPEAT_SECONDS``) while none does; and when one does
    again."""

    check_s = 2.0

    def __init__(self, serving, queue: str, bar: "ProgressBar", repeat_s: float):
        self.serving, self.queue, self.bar, self.repeat_s = serving, queue, bar, repeat_s
        self.checked_at = self.said_at = float("-inf")
        self.since: float | None = None

    def poll(self, doc: dict) -> None:
        now = time.monotonic()
        if doc["status"] in FINAL or now - self.checked_at < self.check_s:
            return
        self.checked_at = now
        workers = self.serving()
        if workers is None:  # unknown (the API did not say): say nothing rather than guess
            return
        if workers:
            if self.since is not None:
                self.bar.note(f"a worker serves queue {self.queue} now")
            self.since = None
            return
        if self.since is None:
            self.since = now
        if now - self.said_at >= self.repeat_s:
            self.said_at = now
            waited = f" (for {fmt_duration(now - self.since)})" if now > self.since else ""
            self.bar.note(f"no worker serves queue {self.queue}{waited}: the job waits until one starts "
                          f"('tracebus up', or 'tracebus worker tracebus.trace.tasks --queues {self.queue}')")


def _follow(args, answer: dict, status, serving, queue: str, repeat_s: float) -> int:
    job_id = answer["job_id"]
    if not args.wait:
        if args.json:
            print_json(answer)
        else:
            print(job_id)
            print(f"follow it: tracebus jobs show {job_id}   result: tracebus fetch {job_id} --out "
                  f"{job_id}.ndjson", file=sys.stderr)
            reused = status()
            if reused.get("reused_from"):
                print(f"answered from the stored result {reused['reused_from']} of an identical request "
                      f"({reused['result_age_s']} s old; --fresh runs it again)", file=sys.stderr)
        return 0
    bar = ProgressBar(sys.stderr)
    watch = WorkerWatch(serving, queue, bar, repeat_s)
    if not args.json:
        print(f"job {job_id} submitted; following it (Ctrl-C stops following, not the job)", file=sys.stderr)
    try:
        while True:
            doc = status()
            watch.poll(doc)
            bar.update(doc)
            if doc["status"] in FINAL:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        bar.close()
        print(f"stopped waiting; job {job_id} goes on (tracebus jobs show {job_id})", file=sys.stderr)
        return 130
    bar.close()
    if args.json:
        print_json(doc)
    else:
        print(summary(doc))
    return 0 if doc["status"] == JobState.COMPLETED and not doc.get("failed_domains") else 1


def progress_of(doc: dict) -> dict:
    """The structured progress of a status document: ``progress_detail`` in the dashboard's
    view (``GET /api/trace/job/{id}``, where ``progress`` is a string), else ``progress``."""
    return doc.get("progress_detail") or doc["progress"]


def summary(doc: dict) -> str:
    """The lines printed when a followed job ends."""
    p = progress_of(doc)
    state = doc.get("state", doc["status"])
    lines = [f"job {doc['job_id']} {state} in {fmt_duration(doc['elapsed_seconds'])}: "
             f"{p['units_done']}/{p['units_total']} units, {p['units_failed']} failed, {p['rows']:,} rows"]
    if doc.get("failed_domains"):
        lines.append(f"failed domains: {', '.join(doc['failed_domains'])}")
    if doc.get("error"):
        lines.append(f"error: {doc['error']}")
    if doc["status"] == JobState.COMPLETED:
        lines.append(f"result: tracebus fetch {doc['job_id']} --out {doc['job_id']}.ndjson")
    return "\n".join(lines)


class ProgressBar:
    """One status line on ``stream``: redrawn in place on a terminal, else printed on change.

    The line fits the terminal's width (the bar shrinks first, then the job id goes) and shows
    units, rows, the rate, the elapsed time, the ETA and the state.
    """

    def __init__(self, stream, width: int = 30, quiet_s: float = 5.0):
        self.stream, self.width, self.quiet_s = stream, width, quiet_s
        self.tty = stream.isatty()
        self.last, self.last_at, self.drawn = None, 0.0, 0
        self.doc: dict | None = None

    def columns(self) -> int:
        if self.tty:
            try:
                return os.get_terminal_size(self.stream.fileno()).columns
            except OSError:
                pass
        return shutil.get_terminal_size().columns  # COLUMNS, else 80

    def render(self, doc: dict, columns: int | None = None) -> str:
        p = progress_of(doc)
        settled, total = p["units_done"] + p["units_failed"], max(1, p["units_total"])
        elapsed, eta = doc.get("elapsed_seconds"), doc.get("estimated_remaining_seconds")
        if elapsed:
            rate = f"{p['rows'] / elapsed:,.0f} rows/s" if p["rows"] else f"{settled / elapsed:.1f} units/s"
        else:
            rate = "- rows/s"
        tail = (f"{settled}/{p['units_total']} units  {p['rows']:,} rows  {rate}  "
                f"{fmt_duration(elapsed)} elapsed  ETA {fmt_duration(eta) if eta is not None else '?'}  "
                f"{doc.get('state', doc['status'])}")
        columns = columns or self.columns()
        prefix = f"{doc['job_id']} "
        if len(prefix) + self.width + 3 + len(tail) > columns:
            prefix = ""  # the bar, the counts and the state matter more than the id
        width = max(5, min(self.width, columns - len(prefix) - len(tail) - 4))
        filled = int(width * settled / total)
        return f"{prefix}[{'#' * filled}{'-' * (width - filled)}] {tail}"[:max(1, columns - 1)]

    def update(self, doc: dict) -> None:
        self.doc = doc
        line = self.render(doc)
        p = progress_of(doc)
        key = (p["units_done"], p["units_failed"], p["rows"], doc["status"])  # not the ETA
        if self.tty:
            self.stream.write("\r" + line.ljust(self.drawn))
            self.drawn = len(line)
        elif key != self.last or time.monotonic() - self.last_at > self.quiet_s:
            self.stream.write(line + "\n")
            self.last, self.last_at = key, time.monotonic()
        self.stream.flush()

    def note(self, text: str) -> None:
        """A message on its own line, above the bar (which is redrawn under it)."""
        if self.tty and self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.drawn = 0
        self.stream.write(text + "\n")
        if self.tty and self.doc is not None:
            self.update(self.doc)
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = 0
