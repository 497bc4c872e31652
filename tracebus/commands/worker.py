"""``tracebus worker MODULE [MODULE ...] --processes N --queues a,b``: run the supervisor."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from tracebus.errors import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("worker", help="run a supervised pool of worker processes",
                       description="Import MODULEs (so their actors register), then fork a pool of "
                                   "workers reading the queues; send the ticks of periodic actors (schedule=... "
                                   "or --schedule FILE). SIGTERM drains, SIGHUP rolls the workers.")
    p.add_argument("modules", nargs="+", metavar="MODULE", help="module(s) declaring actors")
    p.add_argument("--processes", "-p", type=int, default=None,
                   help="worker processes (default: TRACE_WORKER_COUNT)")
    p.add_argument("--queues", "-Q", default=None,
                   help="comma-separated queues (default: every queue the modules' actors use)")
    p.add_argument("--max-jobs", type=int, default=None,
                   help="recycle a worker after this many messages, plus jitter (0: never)")
    p.add_argument("--max-rss-mb", type=int, default=None,
                   help="recycle a worker whose RSS passes this many MB (0: never)")
    p.add_argument("--middleware", "-m", action="append", default=[], metavar="MODULE:CLASS",
                   help="add a middleware to every worker (repeatable; also TRACEBUS_MIDDLEWARE)")
    p.add_argument("--schedule", metavar="FILE", default=None,
                   help="periodic messages: lines 'CRON ACTOR [JSON args]' (also TRACEBUS_SCHEDULE_FILE)")
    p.set_defaults(func=run, long_running=True)


def run(args, settings) -> int:
    from tracebus.engine.supervisor import Supervisor

    _import_modules(args.modules)
    queues = _queues(args, settings)
    processes, max_jobs, max_rss_mb = _pool_limits(args, settings)
    specs = _middleware_specs(args, settings)
    schedules = _schedules(args, settings)
    watch, follow = _url_file_of(args)
    while True:
        supervisor = Supervisor(settings, queues, processes, max_jobs=max_jobs, max_rss_mb=max_rss_mb,
                                middleware=specs, schedules=schedules, redis_url_now=watch,
                                follow_moves=follow)
        code = supervisor.run()
        if supervisor.moved_to is None:
            return code
        # tracebus up runs again on another port: the pool starts again on its new Redis
        os.environ["REDIS_URL"] = supervisor.moved_to
        settings = settings.replace(redis_url=supervisor.moved_to)


def _import_modules(modules) -> None:
    """Import the MODULEs (from the current folder too), so their actors register."""
    sys.path.insert(0, ".")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"cannot import {module!r}: {e}") from None


def _queues(args, settings) -> list[str]:
    """--queues, else every queue the registered actors use; none is an error."""
    from tracebus.engine.actor import registered_actors

    if args.queues:
        queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    else:
        queues = sorted({a.queue_for(settings) for a in registered_actors().values()})
    if not queues:
        raise ConfigError("no queues: the modules declare no actors and --queues is not given")
    return queues


def _pool_limits(args, settings) -> tuple[int, int, int]:
    """(processes, max_jobs, max_rss_mb): each flag, else its setting; checked."""
    processes = args.processes if args.processes is not None else settings.worker_count
    if processes < 1:
        raise ConfigError(f"--processes must be >= 1, got {processes}")
    max_jobs = args.max_jobs if args.max_jobs is not None else settings.max_jobs
    max_rss_mb = args.max_rss_mb if args.max_rss_mb is not None else settings.max_rss_mb
    if max_jobs < 0 or max_rss_mb < 0:
        raise ConfigError("--max-jobs and --max-rss-mb must be >= 0")
    return processes, max_jobs, max_rss_mb


def _middleware_specs(args, settings) -> list[str]:
    """TRACEBUS_MIDDLEWARE's specs then the --middleware ones, each loaded once to check it."""
    from tracebus.engine.middleware import load

    specs = [s for s in settings.middleware.split(",") if s.strip()] + args.middleware
    for spec in specs:
        load(spec)  # fail here, with one line, rather than in every forked worker
    return specs


def _schedules(args, settings) -> list:
    """The periodic actors' schedules, then the schedule file's lines (--schedule, else the setting)."""
    from tracebus.engine.actor import get_actor, registered_actors
    from tracebus.engine.scheduler import Schedule, read_schedule_file

    schedules = [Schedule(a.actor_name, a.schedule, a) for a in registered_actors().values() if a.schedule]
    schedule_file = args.schedule or settings.schedule_file
    if schedule_file:
        schedules += read_schedule_file(schedule_file, get_actor)
    return schedules


def _url_file_of(args):
    """(what the project's ``redis.url`` names now, whether to follow it): followed when the URL
    came from it; watched only (a move is said) when REDIS_URL was given inside a project."""
    from tracebus.engine.project import REDIS_URL_FILE, find_data_dir, read_url_file

    source = getattr(args, "redis_source", "")
    if source.endswith(REDIS_URL_FILE):
        path = Path(source)
        return (lambda: read_url_file(path)), True
    data_dir = find_data_dir()
    if data_dir is None:
        return None, False
    path = data_dir / REDIS_URL_FILE
    return (lambda: read_url_file(path)), False
