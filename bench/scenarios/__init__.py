"""Benchmark scenarios, discovered automatically: one module per scenario.

Adding a scenario means adding a module here; nothing else needs editing. A module
that starts with ``_`` is private (helpers) and is not a scenario. A scenario module has:

* ``NAME`` (str): the command-line name, e.g. ``"throughput"`` or ``"trace-114k"``.
* ``HELP`` (str): one line for ``python -m bench --help``.
* ``add_arguments(parser)`` (optional): adds the scenario's own options to its
  ``argparse`` sub-parser. The common ones (``--scale``, ``--repeat``, ``--out``) exist already.
* ``DEFAULT_REPEAT`` (optional int): repeats when ``--repeat`` is not given (default 3).
* ``run(args, ctx) -> dict``: measures and returns the results. ``ctx`` is a
  :class:`bench.common.Context` (step lines, a temp dir, a private Redis, processes that
  are stopped for you, the environment). The dict may hold, all optional:

  - ``"summary"``: a paragraph for the top of the report;
  - ``"targets"``: a list of ``{"name", "target", "measured", "met"}`` (``met`` is True,
    False or None when it could not be measured);
  - ``"tables"``: a list of ``{"title", "columns": [...], "rows": [[...], ...]}``;
  - ``"images"``: PNG paths (absolute or relative to the output dir) to embed;
  - ``"notes"``: a list of strings;
  - ``"data"``: any JSON-serialisable raw measurements (kept in the .json only).

The runner writes ``<out>/<NAME>-<YYYY-MM-DD>.json`` and ``.md`` from that dict.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from types import ModuleType


def discover() -> dict[str, ModuleType]:
    """Every scenario module in this package, by ``NAME``, in file-name order."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as e:  # one broken scenario must not take the others down
            print(f"bench: scenario module {info.name} skipped: {e!r}", file=sys.stderr)
            continue
        if not (hasattr(module, "NAME") and hasattr(module, "run")):
            continue
        if module.NAME in found:
            raise RuntimeError(f"two scenarios are named {module.NAME!r}")
        found[module.NAME] = module
    return found
