"""``python -m bench <scenario> [--scale S] [--repeat N] [--out DIR]`` and ``python -m bench all``.

Scenarios are the modules of :mod:`bench.scenarios` (found automatically). Each run
starts what it needs itself, prints a line per step, and writes a JSON and a Markdown
report to ``--out`` (default bench/results/). Exit code 0 when it ran (targets missed
are reported, not failures), 1 when a scenario crashed.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from . import common, report
from .scenarios import discover

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=1.0,
                        help="size factor of the workload (default 1.0)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="repeats per measurement; the report gives the median and min-max")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"directory for the .json and .md reports (default {DEFAULT_OUT})")


def build_parser(scenarios: dict) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    for name, module in scenarios.items():
        p = sub.add_parser(name, help=getattr(module, "HELP", ""), description=module.__doc__)
        _common_options(p)
        if hasattr(module, "add_arguments"):
            module.add_arguments(p)
    _common_options(sub.add_parser("all", help="run every scenario with its defaults, one after another"))
    return parser


def run_one(module, args) -> bool:
    """Run one scenario and write its reports. Returns False when it crashed."""
    if args.repeat is None:
        args.repeat = getattr(module, "DEFAULT_REPEAT", 3)
    ctx = common.Context(module.NAME, args)
    ctx.step(f"start (scale {args.scale}, repeat {args.repeat}, temp {ctx.tmp})")
    try:
        results = module.run(args, ctx) or {}
    except BaseException as e:
        ctx.step(f"FAILED: {e!r}")
        traceback.print_exc()
        if isinstance(e, KeyboardInterrupt):
            raise
        return False
    finally:
        ctx.close()
    json_path, md_path = report.write(ctx, results, args.out)
    report.print_console(results)
    ctx.step(f"done in {ctx.elapsed():.0f}s: {json_path} and {md_path}")
    return True


def main(argv: list[str] | None = None) -> int:
    scenarios = discover()
    args = build_parser(scenarios).parse_args(argv)
    if args.scenario != "all":
        return 0 if run_one(scenarios[args.scenario], args) else 1
    failed = []
    for name, module in scenarios.items():
        sub_args = build_parser(scenarios).parse_args(
            [name, "--scale", str(args.scale), "--out", str(args.out)]
            + (["--repeat", str(args.repeat)] if args.repeat is not None else []))
        if not run_one(module, sub_args):
            failed.append(name)
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
