"""The layering contract, checked by import-linter on every test run.

pyproject.toml's ``[tool.importlinter]`` says: the API and the CLI may import the
applications, the applications the job layer, the job layer the engine, never the other
way; the shared root helpers import no layer; no module imports its siblings in a circle; and
no job kind of the trace application (its folders events, msd, stages, query) imports another,
directly or through a shared module.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_graph_reads_top_down_engine_jobs_applications_api():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") == 4


#: The kinds' folders (tracebus/trace/<name>/kind.py registers each).
KIND_PACKAGES = ("tracebus.trace.events", "tracebus.trace.msd", "tracebus.trace.stages", "tracebus.trace.query")
#: The modules outside the kinds' folders that import one: the registry only (one line per kind,
#: by design). Each kind's HTTP side (routes, rate-limit buckets, OpenAPI pieces, handlers) is in
#: its own folder and reaches the API through the registry (issue 37, item 1). A module not
#: listed here may not import a kind.
IMPORTS_A_KIND = {"tracebus.trace.installed"}


def _imported(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports (at any depth of its code; relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            name = ".".join(filter(None, (base, node.module)))
            out.add(name)
            out.update(f"{name}.{alias.name}" for alias in node.names)
    return out


def test_only_the_registry_and_the_listed_modules_import_a_kind():
    importers = set()
    for top in ("tracebus", "api"):
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            if module.startswith(KIND_PACKAGES):
                continue
            if any(name == k or name.startswith(k + ".") for name in _imported(path, module) for k in KIND_PACKAGES):
                importers.add(module)
    assert "tracebus.trace.installed" in importers  # the scan sees imports at all
    assert importers == IMPORTS_A_KIND, (
        "a module outside the kinds' folders imports a kind: give the kind's registry what it needs instead "
        f"(new: {sorted(importers - IMPORTS_A_KIND)}; no longer: {sorted(IMPORTS_A_KIND - importers)})")


#: The modules outside a kind's folder allowed to name it (a profile it serves, a kind of its
#: jobs), each with the reason it cannot move yet: none. A module not listed here may not; one
#: that stops doing so leaves the list. Where a text must name a kind's profiles (a description,
#: an example request), it is composed from the registry when it is written.
NAMES_A_KIND: dict[str, list[str]] = {}


def _named(path: Path, names: dict[str, str]) -> set[str]:
    """The kinds ``path``'s string literals name (docstrings aside): a name as a whole token, not
    within a URL's path (``/api/query-tool/...`` is the original's URL, not the kind)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    texts = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    return {f"{kind}:{name}" for text in texts for name, kind in names.items()
            if re.search(rf"(?<![\w/-]){re.escape(name)}(?![\w-])", text)}


def test_no_module_outside_a_kind_names_it():
    """No module outside a kind's folder spells what names it (:meth:`tracebus.trace.jobkind.JobKind.names`,
    read from the registry, so a new kind is covered too): it asks the registry instead."""
    from tracebus.trace import installed, kinds

    names, folders = {}, {}
    for kind in kinds.registered().values():
        folders[kind.name] = type(kind).__module__.rpartition(".")[0]
        names.update(dict.fromkeys(kind.names(), kind.name))
    assert {"trace-seed", "trace-lin", "mid_section_defect", "query-tool"} <= set(names), names  # the registry answers
    found = {}
    for top in ("tracebus", "api"):
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            if module == installed.__name__:
                continue
            named = {n for n in _named(path, names)
                     if not module.startswith(folders[n.partition(":")[0]] + ".")}
            if named:
                found[module] = sorted(named)
    assert found == NAMES_A_KIND, (
        "a module outside a kind's folder names the kind: ask the registry (tracebus.trace.kinds) instead "
        f"(new: { {m: v for m, v in found.items() if NAMES_A_KIND.get(m) != v} }; "
        f"no longer: {sorted(set(NAMES_A_KIND) - set(found))})")
