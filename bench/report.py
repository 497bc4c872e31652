"""Reports: ``<out>/<scenario>-<date>.json`` (everything) and ``.md`` (for people).

The Markdown states the machine, each target and whether it was met, the tables and
the images a scenario returned (see :mod:`bench.scenarios` for the results dict).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def _met(value) -> str:
    return {True: "met", False: "NOT met", None: "not measured"}.get(value, str(value))


def _table(columns, rows) -> list[str]:
    lines = ["| " + " | ".join(str(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _environment_lines(env: dict) -> list[str]:
    packages = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items() if v)
    return [f"- CPU: {env.get('cpu_count')} x {env.get('cpu_model')}, {env.get('memory_gb')} GB RAM",
            f"- OS: {env.get('platform')}",
            f"- Python {env.get('python')}, Redis server {env.get('redis_server')}",
            f"- Packages: {packages}",
            f"- tracebus commit: {env.get('git_commit')}",
            f"- Load average (1, 5, 15 min) at start: {env.get('load_avg_start')}, "
            f"at end: {env.get('load_avg_end')}"]


def markdown(ctx, results: dict, out_dir: Path) -> str:
    args = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ctx.args).items()
            if k not in ("out", "scenario")}
    lines = [f"# bench: {ctx.name} ({ctx.date})", "",
             f"Run at {ctx.started_at} for {ctx.elapsed():.0f} s with `{json.dumps(args)}`.", "",
             "## Machine", "", *_environment_lines(ctx.env), ""]
    if results.get("summary"):
        lines += [results["summary"], ""]
    if results.get("targets"):
        lines += ["## Targets", ""]
        lines += _table(["Target", "Required", "Measured", "Result"],
                        [[t["name"], t["target"], t["measured"], _met(t.get("met"))] for t in results["targets"]])
        lines.append("")
    for table in results.get("tables", []):
        lines += [f"## {table['title']}", ""] + _table(table["columns"], table["rows"]) + [""]
    for image in results.get("images", []):
        rel = os.path.relpath(image, out_dir) if os.path.isabs(image) else image
        lines += [f"![{Path(image).stem}]({rel})", ""]
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    return "\n".join(lines)


def write(ctx, results: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write the JSON and Markdown reports; returns their paths."""
    out_dir = Path(out_dir)
    ctx.env["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{ctx.name}-{ctx.date}"
    payload = {"scenario": ctx.name, "date": ctx.date, "started_at": ctx.started_at,
               "duration_s": round(ctx.elapsed(), 1),
               "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(ctx.args).items()},
               "environment": ctx.env, "results": results}
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    md_path.write_text(markdown(ctx, results, out_dir))
    return json_path, md_path


def print_console(results: dict) -> None:
    """Print the tables and targets as plain text."""
    for table in results.get("tables", []):
        widths = [max(len(str(c)) for c in col) for col in zip(table["columns"], *table["rows"])]
        print(f"\n{table['title']}")
        for row in [table["columns"], *table["rows"]]:
            print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    if results.get("targets"):
        print("\nTargets")
        for t in results["targets"]:
            print(f"  [{_met(t.get('met')):>12}] {t['name']}: {t['measured']} (required {t['target']})")
    print(flush=True)
