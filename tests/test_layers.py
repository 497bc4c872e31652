"""The layering contract, checked by import-linter on every test run.

pyproject.toml's ``[tool.importlinter]`` says: the API and the CLI may import the
applications, the applications the job layer, the job layer the engine, never the other
way; the shared root helpers import no layer; no module imports its siblings in a circle; and
no job kind of the trace application (its folders events, msd, stages, query) imports another,
directly or through a shared module.
"""

from __future__ import annotations

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
