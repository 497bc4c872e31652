"""The dashboard's routes answer in the original's envelope by default (issue 36, item 1).

The query-tool page's lineage composables read ``payload.data`` and nothing else: with a bare
answer every lot drew no children, no parents and no name. Here the dashboard's own files
(useLotLineage.ts, useReverseLineage.ts, useAsyncJobPolling.ts, core/api.ts and utils/values.ts at
commit 1d3f4282, read from the dashboard's repository as the search tool's fetch leaves it, never
committed here; type-stripped by sucrase and nothing else) run under node against ``tracebus up`` with its default settings, and the trees they draw are
checked against the original's steps in SQL (tests/test_lineage_trees.py), answered at once
and through a lineage job (202, poll, ``/result``) alike. Then each dashboard
route is checked enveloped by default, bare with ``TRACEBUS_API_DASHBOARD_ENVELOPE=0``, and
tracebus's own routes bare unless ``TRACEBUS_API_ENVELOPE=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.api_support import api_broker, api_settings, make_client, user  # noqa: F401
from tests.test_api_msd_stages import SYNC, seed_body
from tests.test_lineage_trees import SEEDS, Db, expected_forward, expected_reverse
from tests.test_up import ready_up

DASHBOARD = Path(__file__).resolve().parent / "dashboard"
#: The dashboard's repository (a git directory, as the search tool's ``fetch`` of
#: github:beabigegg/DashBoard_clone leaves it): its code is read from there when the tests run.
DASHBOARD_GIT = Path(os.environ.get("TRACEBUS_TEST_DASHBOARD_GIT", "/work/.mirror/beabigegg+DashBoard_clone/repo"))
DASHBOARD_COMMIT = "1d3f4282"
#: The page's files lineage.mjs runs, under frontend/src/.
DASHBOARD_FILES = ("core/api.ts", "shared-composables/useAsyncJobPolling.ts", "query-tool/utils/values.ts",
                   "query-tool/composables/useLotLineage.ts", "query-tool/composables/useReverseLineage.ts")


def _show(path: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", str(DASHBOARD_GIT), "show", f"{DASHBOARD_COMMIT}:frontend/src/{path}"],
                          capture_output=True, timeout=30)


def composables_missing() -> str | None:
    """Why the dashboard's composables cannot run here (None: they can); .ci/run installs sucrase."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (DASHBOARD / "node_modules" / "sucrase").is_dir():
        return "sucrase is not installed (npm ci --prefix tests/dashboard)"
    if shutil.which("git") is None or _show(DASHBOARD_FILES[0]).returncode != 0:
        return (f"the dashboard's repository at {DASHBOARD_COMMIT} is not at {DASHBOARD_GIT} "
                "(fetch github:beabigegg/DashBoard_clone, or set TRACEBUS_TEST_DASHBOARD_GIT)")
    return None


@pytest.fixture(scope="module")
def dashboard_src(tmp_path_factory) -> Path:
    """The page's files at DASHBOARD_COMMIT in a folder of the test's own."""
    return write_dashboard_src(tmp_path_factory.mktemp("dashboard-src"))


def write_dashboard_src(out: Path) -> Path:
    """Write the page's files at DASHBOARD_COMMIT under ``out``; return it."""
    for path in DASHBOARD_FILES:
        shown = _show(path)
        assert shown.returncode == 0, shown.stderr
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(shown.stdout)
    return out


def draw(src: Path, base_url: str, direction: str, seeds: list[str]) -> dict:
    """What the page's composable holds after ``primeResolvedLots`` of ``seeds``."""
    run = subprocess.run(["node", str(DASHBOARD / "lineage.mjs"), base_url, direction, ",".join(seeds)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "DASHBOARD_SRC": str(src)})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def default_up(tmp_path_factory):
    """``tracebus up --scale 0.01`` with its defaults (its own Redis)."""
    with ready_up(tmp_path_factory.mktemp("up"), "--scale", "0.01") as run:
        yield run


@pytest.fixture(scope="module")
def up_seeds(default_up) -> list[str]:
    with sqlite3.connect(default_up.home / "var" / "sample.db") as conn:
        return [r[0] for r in conn.execute(SEEDS)]


def assert_drawn(drawn: dict, tree: dict, names: dict, edges: set) -> None:
    for cid, linked in tree.items():
        entry = drawn["entries"].get(cid)
        assert entry is not None and entry["error"] == "", (cid, entry)
        assert sorted(entry["children"]) == sorted(linked), cid
    assert {k: v for k, v in drawn["names"].items() if k in names} == names
    assert {(e["from_cid"], e["to_cid"], e["edge_type"]) for e in drawn["edges"]} == edges


@pytest.mark.skipif(composables_missing() is not None, reason=composables_missing() or "")
def test_the_query_tool_pages_composables_draw_both_trees_against_a_default_up(default_up, up_seeds, dashboard_src):
    db = Db(default_up.home / "var" / "sample.db")
    forward, reverse = expected_forward(db, up_seeds), expected_reverse(db, up_seeds)
    assert forward["children_map"] and reverse["parent_map"]  # the seeds have links to draw

    drawn = draw(dashboard_src, default_up.base_url, "forward", up_seeds)
    assert sorted(drawn["roots"]) == forward["roots"]
    assert_drawn(drawn, forward["children_map"], forward["names"], forward["edges"])
    assert drawn["serials"] == forward["leaf_serials"]

    drawn = draw(dashboard_src, default_up.base_url, "reverse", up_seeds)
    assert_drawn(drawn, reverse["parent_map"], reverse["names"], reverse["edges"])


@pytest.fixture(scope="module")
def async_up(tmp_path_factory):
    """``tracebus up --scale 0.01`` whose lineage of more than 2 seeds is a job."""
    with ready_up(tmp_path_factory.mktemp("up"), "--scale", "0.01", TRACE_ASYNC_CID_THRESHOLD="2") as run:
        yield run


@pytest.mark.skipif(composables_missing() is not None, reason=composables_missing() or "")
def test_the_composables_follow_a_lineage_job_to_the_same_trees(async_up, dashboard_src):
    # The 202's data (async, status_url), useAsyncJobPolling.ts's poll of it, and the data of
    # GET status_url + "/result": each in the envelope the composables read.
    db = Db(async_up.home / "var" / "sample.db")
    with sqlite3.connect(async_up.home / "var" / "sample.db") as conn:
        seeds = [r[0] for r in conn.execute(SEEDS)]
    assert len(seeds) > 2
    forward = expected_forward(db, seeds)

    drawn = draw(dashboard_src, async_up.base_url, "forward", seeds)

    assert sorted(drawn["roots"]) == forward["roots"]
    assert_drawn(drawn, forward["children_map"], forward["names"], forward["edges"])
    jobs = async_up.get("/api/v1/jobs")["jobs"]  # it went through a lineage job
    assert any(j["job_id"].startswith("trace-lin-") for j in jobs), jobs


DASHBOARD_POSTS = [("/api/trace/lineage", {"profile": "query_tool", "container_ids": ["NO-SUCH-CID"]}),
                   ("/api/trace/seed-resolve", seed_body(start_date="2025-01-01", end_date="2025-01-11")),
                   ("/api/trace/events", {"profile": "query_tool", "container_ids": ["NO-SUCH-CID"],
                                          "domains": ["history"]})]


@pytest.mark.parametrize("path,body", DASHBOARD_POSTS, ids=[p for p, _ in DASHBOARD_POSTS])
def test_the_trace_routes_are_enveloped_by_default_and_bare_when_switched_off(api_settings, api_broker, user,
                                                                             path, body):
    enveloped = make_client(api_settings, api_broker, user, api_dashboard_envelope=1, **SYNC)
    bare = make_client(api_settings, api_broker, user, api_dashboard_envelope=0, **SYNC)

    wrapped, plain = enveloped.simulate_post(path, json=body), bare.simulate_post(path, json=body)

    assert wrapped.status_code == plain.status_code == 200, wrapped.text
    assert wrapped.json["success"] is True and set(wrapped.json["meta"]) >= {"timestamp", "app_version"}
    assert "success" not in plain.json and wrapped.json["data"].keys() == plain.json.keys()
    bad = enveloped.simulate_post(path, json={**body, "profile": "nope"})
    assert bad.status_code == 400 and bad.json["success"] is False and bad.json["error"]["code"]


def test_a_trace_jobs_status_and_errors_are_enveloped_and_tracebus_own_routes_are_not(api_settings, api_broker,
                                                                                        user):
    client = make_client(api_settings, api_broker, user, api_dashboard_envelope=1, queue="idle-dash")
    accepted = client.simulate_post("/api/trace/events", json={
        "profile": "query_tool", "container_ids": [f"C{i:05d}" for i in range(300)], "domains": ["history"]})
    assert accepted.status_code == 202 and accepted.json["success"] is True
    job_id = accepted.json["data"]["job_id"]

    status = client.simulate_get(f"/api/trace/job/{job_id}")
    early = client.simulate_get(f"/api/trace/job/{job_id}/result", params={"domain": "history"})
    mine = client.simulate_get(f"/api/v1/jobs/{job_id}")

    assert status.status_code == 200 and status.json["data"]["job_id"] == job_id
    assert early.status_code == 409 and early.json["success"] is False
    assert early.json["error"]["code"] == "JOB_NOT_COMPLETE" and early.json["meta"]["job_status"] == "queued"
    assert mine.status_code == 200 and "success" not in mine.json and mine.json["job_id"] == job_id
    doc = client.simulate_get("/openapi.json").json
    lineage_ok = doc["paths"]["/api/trace/lineage"]["post"]["responses"]["200"]["content"]["application/json"]
    assert lineage_ok["schema"]["required"] == ["success", "data", "meta"]
    jobs_ok = doc["paths"]["/api/v1/jobs/{job_id}"]["get"]["responses"]["200"]["content"]["application/json"]
    assert "success" not in json.dumps(jobs_ok["schema"])[:200]
