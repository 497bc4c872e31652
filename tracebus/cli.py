"""The ``tracebus`` command line: a dispatcher over ``tracebus/commands/*``.

Each command module has ``add_parser(subparsers)`` (which sets ``func``) and a run
function; this file only wires them, resolves where the configuration comes from
(``--redis-url``, ``--env-file``, the environment, ``var/redis.url``: see
:mod:`tracebus.commands._environment`), sets up logging and turns library errors into a
one-line message and a documented exit code instead of a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from tracebus import commands, logs
from api.settings import ApiSettings
from tracebus.commands import _environment
from tracebus.engine.errors import BrokerConnectionError
from tracebus.errors import ConfigError, InvalidParams, TracebusError
from tracebus.trace.errors import CidLimitExceeded

#: Exit codes of the CLI (commands may add their own, documented in their help).
RET_OK = 0
RET_ERROR = 1          # a runtime failure: Redis unreachable, a job failed, ...
RET_USAGE = 2          # bad input: arguments, settings, an unknown queue or message
RET_INTERRUPTED = 130  # Ctrl-C
RET_BROKEN_PIPE = 141  # the reader of stdout went away (``| head``): as a SIGPIPE death, quietly


def _command_parser_class(common: argparse.ArgumentParser) -> type:
    """The class of every command's (and action's) parser: each takes the global options too,
    anywhere after its name (``jobs list --redis-url URL``), and names itself as ``_parser``
    so a stray argument is refused with that command's usage, not the top-level one."""

    class CommandParser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs["parents"] = [*kwargs.get("parents", ()), common]
            super().__init__(*args, **kwargs)
            self.set_defaults(_parser=self)

    return CommandParser


def _global_options(suppress: bool) -> argparse.ArgumentParser:
    default = argparse.SUPPRESS if suppress else None  # a command's copy never resets the global one
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--redis-url", metavar="URL", default=default,
                        help="the Redis to use (wins over REDIS_URL, --env-file and var/redis.url)")
    common.add_argument("--env-file", metavar="FILE", default=default,
                        help="read settings from FILE (NAME=value lines, as deploy/tracebus.env); "
                             "the environment wins over it")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracebus", description=__doc__.splitlines()[0], parents=[_global_options(False)],
        epilog="Exit codes: 0 ok, 1 runtime failure (Redis unreachable, job failed), 2 bad input, "
               "130 interrupted, 141 output pipe closed.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_command_parser_class(_global_options(True)))
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):  # helpers shared by commands, not commands
            continue
        importlib.import_module(f"{commands.__name__}.{info.name}").add_parser(sub)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (tests capture into StringIO)
        pass


def _log_level(args, settings: ApiSettings) -> str:
    """A one-shot command (``submit``, ``dead requeue``...) prints its answer: on a text
    console its own INFO lines would only repeat it beside a timestamp, so below an explicit
    ``TRACEBUS_LOG_LEVEL`` it logs warnings only. Long-running ones (``up``, ``worker``) and
    the JSON format keep the configured level."""
    if (getattr(args, "long_running", False) or settings.log_format == "json"
            or ApiSettings.is_set("TRACEBUS_LOG_LEVEL")):
        return settings.log_level
    return "warning"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # said with the usage of the command they were given to
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        # --api: the command goes through HTTP, so whether up runs here does not matter
        source = _environment.apply(args.redis_url, args.env_file,
                                    use_url_file=getattr(args, "find_redis_url", True) and not getattr(args, "api", None))
        settings = ApiSettings.from_env()
    except ConfigError as e:
        print(f"tracebus: configuration error: {e}", file=sys.stderr)
        return RET_USAGE
    args.redis_source = source
    logs.setup(settings.log_format, _log_level(args, settings))
    try:
        code = args.func(args, settings) or RET_OK
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return RET_BROKEN_PIPE
    except (ConfigError, InvalidParams, CidLimitExceeded) as e:  # bad input: like a usage error
        print(f"tracebus: {e}", file=sys.stderr)
        return RET_USAGE
    except BrokerConnectionError as e:
        hint = " (is `tracebus up` still running?)" if source.endswith(_environment.REDIS_URL_FILE) else ""
        print(f"tracebus: {e} [Redis URL from {source}]{hint}", file=sys.stderr)
        return RET_ERROR
    except TracebusError as e:
        print(f"tracebus: {e}", file=sys.stderr)
        return RET_ERROR
    except KeyboardInterrupt:
        return RET_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
