"""The README's library example, run as written: the module of actors it shows is written to
``myapp/reports.py``, its worker command and its Python lines run in that folder over the
test Redis, and the command-line lines that send to it (``send ... --wait`` prints 42; a queue
nothing declared is exit 2) run as a user types them, with ``.venv/bin`` on the PATH."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_readmes_library_example_runs_as_written(redis_url, tmp_path):
    library = section("Using it as a library")
    module = next(b for b in blocks(library, "python") if b.startswith("# myapp/reports.py\n"))
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "reports.py").write_text(module)
    [worker_line] = [ln for b in blocks(library, "sh") for ln in b.splitlines() if ln.startswith("tracebus worker")]
    usage = next(b for b in blocks(library, "python") if b.startswith("from myapp.reports import"))
    cli = [ln.split("  #")[0].strip() for b in blocks(section("The command line"), "sh")
           for ln in b.splitlines() if ln.startswith(("tracebus send myapp.reports:", "tracebus send build_report"))]
    assert len(cli) == 4, cli

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
    env.update(REDIS_URL=redis_url, TRACEBUS_KEY_PREFIX=f"readme{os.getpid()}", TRACE_WORKER_COUNT="1",
               TRACEBUS_BLOCK_MS="100", TRACEBUS_GRACEFUL_TIMEOUT_SECONDS="5",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(["bash", "-c", worker_line], cwd=tmp_path, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # the Python lines, each as typed at the prompt (an expression's value is printed)
        console = ("import code, sys\nconsole = code.InteractiveConsole()\n"
                   "for line in sys.stdin.read().splitlines():\n    console.push(line)\n")
        ran = subprocess.run([sys.executable, "-c", console], input=usage, cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
        assert "42" in ran.stdout.splitlines(), (ran, (tmp_path / "worker.log").read_text()[-2000:])
        assert "Traceback" not in ran.stderr, ran.stderr

        answers = [subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=60) for line in cli]
        build, add, bare, typo = answers
        assert build.returncode == 0 and build.stdout.strip(), build
        assert add.returncode == 0 and add.stdout.strip() == "42", add
        assert bare.returncode == 0 and bare.stdout.strip(), bare
        assert typo.returncode == 2 and "no queue 'nosuchqueue'" in typo.stderr, typo
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)


def test_the_files_the_docs_name_are_in_the_repository():
    # docs/porting.md named the DWH schema at a path outside the repository (issue 36)
    import re

    for doc in ("README.md", "docs/porting.md", "deploy/README.md"):
        text = (ROOT / doc).read_text()
        named = set(re.findall(r"`((?:tests|tracebus|api|deploy|docs|examples|bench)/[\w./-]+\.(?:py|json|md|lua|conf|mjs))`",
                               text))
        missing = sorted(p for p in named if not (ROOT / p).exists())
        assert not missing, (doc, missing)
        assert "/work/" not in text, doc


def test_the_readme_names_every_equipment_period_query_type_as_served():
    from tracebus.trace.query.equipment import QUERY_TYPES

    row = next(line for line in README.splitlines() if line.startswith("| `POST /api/query-tool/equipment-period`"))
    assert f"all {['', 'one', 'two', 'three', 'four', 'five'][len(QUERY_TYPES)]}" in row
    assert all(f"`{t}`" in row for t in QUERY_TYPES) and "the others answer 400" not in row
