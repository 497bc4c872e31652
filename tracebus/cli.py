"""The ``tracebus`` command line: a dispatcher over ``tracebus/commands/*``.

Each command module has ``add_parser(subparsers)`` (which sets ``func``) and a run
function; this file only wires them, sets up logging and turns library errors into a
one-line message and a non-zero exit code instead of a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from tracebus import commands, logs
from api.settings import ApiSettings
from tracebus.errors import ConfigError, InvalidParams, TracebusError

#: Exit codes of the CLI.
RET_OK = 0
RET_ERROR = 1
RET_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracebus", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):  # helpers shared by commands, not commands
            continue
        importlib.import_module(f"{commands.__name__}.{info.name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = ApiSettings.from_env()
    except ConfigError as e:
        print(f"tracebus: configuration error: {e}", file=sys.stderr)
        return RET_USAGE
    logs.setup(settings.log_format, settings.log_level)
    try:
        return args.func(args, settings) or RET_OK
    except (ConfigError, InvalidParams) as e:  # bad input: like a usage error
        print(f"tracebus: {e}", file=sys.stderr)
        return RET_USAGE
    except TracebusError as e:
        print(f"tracebus: {e}", file=sys.stderr)
        return RET_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
