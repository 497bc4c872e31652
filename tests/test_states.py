"""The one job-state vocabulary: every state has its word in every contract, the Lua scripts
spell only its members, the states render as the plain words they always were, and no module
but the two state modules spells a state or a state's public code (nor does the monitor's script)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import msgpack
import orjson
import pytest

from tracebus.jobs import contract
from tracebus.jobs.states import (ACTIVE_STATES, FINAL_STATES, JOB_CANCELLED, JOB_FAILED, PUBLIC_CODE, PUBLIC_STATUS,
                                  RESULT_STATES, RETRYABLE_STATES, STATES, JobState, UnitState, check_covered,
                                  public_progress, words)
from tracebus.trace import dashview, jobview, states as trace_states
from tracebus.trace.stages import jobs as stage_jobs

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "tracebus" / "jobs" / "lua"
_DETAIL = {"units_done": 1, "units_failed": 1, "units_total": 4}


def test_states_are_the_stored_words():
    assert STATES == ("queued", "running", "completed", "partial", "failed", "cancelled")
    assert [s.value for s in UnitState] == ["pending", "queued", "running", "done", "failed", "cancelled"]
    assert ACTIVE_STATES | FINAL_STATES == set(JobState) and not ACTIVE_STATES & FINAL_STATES
    assert RESULT_STATES < FINAL_STATES
    for s in JobState:  # stored and written byte-identical to the plain word
        assert f"{s}" == str(s) == s.value
        assert json.dumps(s) == orjson.dumps(s).decode() == f'"{s.value}"'
        assert msgpack.unpackb(msgpack.packb({"state": s})) == {"state": s.value}


@pytest.mark.parametrize("name", ["PUBLIC_STATUS"])
def test_job_layer_contract_covers_every_state(name):
    mapping = {"PUBLIC_STATUS": PUBLIC_STATUS}[name]
    assert set(mapping) == set(JobState)
    assert set(mapping.values()) <= {"queued", "running", "completed", "failed"}
    assert set(PUBLIC_CODE) <= set(JobState)


@pytest.mark.parametrize("name", ["V1_STATUS", "V1_STAGE", "POLLER_STATUS", "STAGE_STATUS"])
def test_trace_contracts_cover_every_state(name):
    mapping = getattr(trace_states, name)
    assert set(mapping) == set(JobState)
    assert all(isinstance(v, str) and v for v in mapping.values())


def test_check_covered_refuses_a_missing_state():
    with pytest.raises(AssertionError, match="partial"):
        check_covered("X", {s: s.value for s in JobState if s is not JobState.PARTIAL})


def _generic_doc(state: str) -> dict:
    return {"job_id": "trace-" + "0" * 24, "kind": "trace", "status": state, "user": "u", "items": 1,
            "sections": ["a"], "progress": dict(_DETAIL), "created_at": 1.0, "started_at": 2.0,
            "finished_at": None, "elapsed_seconds": 1.0, "estimated_remaining_seconds": None,
            "error": None, "failed_sections": [], "section_states": [{"section": "a", "state": "running"}],
            "app": {"profile": "p"}}


@pytest.mark.parametrize("state", list(JobState))
def test_every_state_renders_in_every_contract(state):
    """Each contract answers every state with a word it documents (no KeyError, no fallthrough)."""
    generic = contract.render(_generic_doc(state), contract.KindView())
    assert generic["status"] == PUBLIC_STATUS[state] and generic["state"] == state
    assert generic["progress"] == public_progress(state, 2, 4)
    v1 = jobview.render_status(_generic_doc(state))
    assert v1["status"] == trace_states.V1_STATUS[state]
    assert v1["progress"]["stage"] == trace_states.V1_STAGE[state]
    poll = dashview.dashboard_status(v1)
    assert poll["status"] == trace_states.POLLER_STATUS[state]
    assert poll.get("code") == trace_states.POLLER_CODE.get(state)
    assert poll["status"] in {"queued", "running", "completed", "failed"}  # the poller stops on these
    sse = dashview.dashboard_progress({"state": state, "status": trace_states.V1_STATUS[state]})
    assert sse["status"] == trace_states.POLLER_STATUS[state]
    assert stage_jobs.progress_text(stage_jobs.SEED_KIND, state) == trace_states.stage_progress(
        "resolving seeds", state)
    assert trace_states.stage_failed(state) == (trace_states.STAGE_STATUS[state] == "failed")


def test_the_contracts_words_are_unchanged():
    """The words each contract gave each state before the vocabulary was one enum."""
    q, r, c, p, f, x = JobState
    assert {s.value: PUBLIC_STATUS[s] for s in JobState} == {
        "queued": "queued", "running": "running", "completed": "completed", "partial": "completed",
        "failed": "failed", "cancelled": "failed"}
    assert [trace_states.V1_STATUS[s] for s in (q, r, c, p, f, x)] == [
        "queued", "running", "completed", "completed", "failed", "cancelled"]
    assert [trace_states.POLLER_STATUS[s] for s in (q, r, c, p, f, x)] == [
        "queued", "running", "completed", "completed", "failed", "failed"]
    assert [trace_states.STAGE_STATUS[s] for s in (q, r, c, p, f, x)] == [
        "queued", "running", "completed", "failed", "failed", "failed"]
    assert [dashview.progress_text(s, _DETAIL) for s in (q, r, c, p, f, x)] == [
        "", "fetching events (2/4 units)", "complete", "complete", "failed", "cancelled"]
    assert [public_progress(s, 2, 4) for s in (q, r, c, p, f, x)] == [
        "", "running (2/4 units)", "complete", "complete", "failed", "cancelled"]
    assert [trace_states.stage_progress("tracing lineage", s) for s in (q, r, c, p, f, x)] == [
        "", "tracing lineage", "complete", "partial", "failed", "cancelled"]


# Where the job scripts read or write a job's status or a unit's state.
_JOB_STATUS = [re.compile(r"\bstatus\s*[~=]?=\s*'(\w+)'"), re.compile(r"'status',\s*'(\w+)'"),
               re.compile(r"\bfinal\s*=\s*'(\w+)'")]
_UNIT_STATE = [re.compile(r"\bstate\s*[~=]?=\s*'(\w+)'")]


def _spelled(patterns) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(LUA.glob("*.lua")):
        # An HMGET line reads fields ('status', 'units_done', ...): no status word is set there.
        code = "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines() if "HMGET" not in line)
        for pattern in patterns:
            for word in pattern.findall(code):
                found.setdefault(word, set()).add(path.name)
    return found


def test_lua_scripts_spell_only_enum_members():
    statuses, unit_states = _spelled(_JOB_STATUS), _spelled(_UNIT_STATE)
    assert set(statuses) - set(STATES) == set(), statuses
    assert set(unit_states) - {s.value for s in UnitState} == set(), unit_states
    # The scan sees the scripts' states at all: every job state the scripts set or test is found.
    assert {"queued", "running", "completed", "partial", "failed", "cancelled"} <= set(statuses)
    assert {"pending", "queued", "running", "cancelled"} <= set(unit_states)


def test_lua_status_zsets_are_in_enum_order():
    """The scripts index the status zsets by name in the order Python passes them (STATES)."""
    lib = (LUA / "_jobstats_lib.lua").read_text()
    table = re.search(r"JOB_STATUS_OFFSET\s*=\s*\{([^}]*)\}", lib).group(1)
    offsets = {name: int(n) for name, n in re.findall(r"(\w+)\s*=\s*(\d+)", table)}
    assert sorted(offsets, key=offsets.get) == list(STATES)
    assert sorted(offsets.values()) == list(range(1, len(STATES) + 1))


def test_openapi_enums_and_cli_words_come_from_the_maps():
    assert words(trace_states.V1_STATUS) == ["queued", "running", "completed", "failed", "cancelled"]
    assert words(trace_states.POLLER_STATUS) == words(PUBLIC_STATUS) == words(trace_states.STAGE_STATUS) == [
        "queued", "running", "completed", "failed"]
    assert trace_states.V1_FINAL == ("completed", "failed", "cancelled")


def test_the_maps_beside_the_contracts_are_unchanged():
    q, r, c, p, f, x = JobState
    assert [trace_states.QUERY_STATE[s] for s in (q, r, c, p, f, x)] == [
        "queued", "running", "completed", "failed", "failed", "cancelled"]
    assert [trace_states.ended_code(s) for s in (f, x)] == ["JOB_FAILED", "JOB_CANCELLED"]
    assert trace_states.listed_states("completed") == {c, p}
    assert [trace_states.listed_states(s.value) for s in (q, r, p, f, x)] == [{q}, {r}, {p}, {f}, {x}]
    assert trace_states.monitor_words()["codes"] == {"partial": "EVENTS_PARTIAL_FAILURE", "cancelled": "JOB_CANCELLED"}


def test_retryable_states_are_the_ones_the_retry_script_accepts():
    script = (LUA / "job_retry.lua").read_text()
    refused_unless = re.search(r"if (status ~= '\w+'(?: and status ~= '\w+')*) then\s+return \{'conflict'", script)
    assert set(re.findall(r"'(\w+)'", refused_unless.group(1))) == set(RETRYABLE_STATES)


# -- nobody else spells a state or a code -------------------------------------------------------
_STATE_MODULES = {"tracebus/jobs/states.py", "tracebus/trace/states.py"}
_STATE_WORDS = {s.value for s in JobState} | {s.value for s in UnitState}
#: The public codes a state gives, in every contract.
_CODES = {*PUBLIC_CODE.values(), *trace_states.POLLER_CODE.values(), *trace_states.STAGE_CODE.values(),
          *trace_states.V1_CODE.values(), JOB_CANCELLED, JOB_FAILED}
#: The same words in other vocabularies, where they are not a job's or a unit's state.
_OTHER_VOCABULARIES: dict[str, set[str]] = {
    "tracebus/engine/": _STATE_WORDS,  # a message's states, the queues' counters: below the job layer
    "tracebus/commands/queues.py": {"running", "pending"},  # queue columns (waiting, running, ...)
    "tracebus/commands/status.py": {"running", "pending", "done"},  # queue and worker columns
    "tracebus/commands/jobs.py": {"done"},  # a domain's unit counts, keyed by unit state (done: n)
    "tracebus/commands/_followed.py": {"failed"},  # a domain_end line's flag
    "tracebus/jobs/results.py": {"partial"},  # a hash field: the unit's partial aggregate
    "tracebus/jobs/reuse.py": {"running"},  # a hash field: the job running for a fingerprint
    "tracebus/jobs/share.py": {"pending"},  # XPENDING's summary field: messages read, not yet acked
    "tracebus/trace/sources/control.py": {"cancelled"},  # why a statement was ended on the server
    "tracebus/trace/quality.py": {"partial", "failed"},  # quality_meta's status
    "tracebus/trace/msd/quality_meta.py": {"partial", "failed"},  # quality_meta's status
    "api/openapi.py": {"partial", "failed"},  # the partial=1 query parameter; quality_meta's status
    "api/openapi_monitor.py": {"pending", "done"},  # queue and worker fields
    "api/resources/jobs.py": {"partial"},  # the partial=1 query parameter
}


def _strings(path: Path):
    """(line, value) of each string constant of a module that is not a docstring (an f-string's
    literal parts are constants too: a code written as ``{JOB_CANCELLED}`` is not one)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def _spelled_states_and_codes(path: Path, rel: str) -> list[str]:
    allowed = set().union(*(words for prefix, words in _OTHER_VOCABULARIES.items() if rel.startswith(prefix)))
    found = []
    for line, value in _strings(path):
        if value in _STATE_WORDS - allowed:
            found.append(f"{rel}:{line}: state {value!r}")
        found += [f"{rel}:{line}: code {code}" for code in _CODES if re.search(rf"\b{code}\b", value)]
    return found


def test_no_module_but_the_state_modules_spells_a_state_or_a_code():
    """Every mapping of a state, and every code a state gives, is written in the state modules and
    imported from them; a literal elsewhere is a second place that can drift."""
    found = []
    for tree in ("tracebus", "api"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in _STATE_MODULES:
                found += _spelled_states_and_codes(path, rel)
    assert found == [], ("import the state or code from tracebus.jobs.states / tracebus.trace.states; "
                         "a word of another vocabulary goes in _OTHER_VOCABULARIES with what it is")
    # The scan sees what it looks for: the state modules spell every state and code.
    own = {f.split(": ", 1)[1] for rel in _STATE_MODULES for f in _spelled_states_and_codes(ROOT / rel, rel)}
    assert {f"state {s.value!r}" for s in JobState} | {f"code {c}" for c in _CODES} <= own


def test_the_monitor_keeps_no_table_of_states():
    """The page reads the job states' words from GET /api/v1/states; its only such word is a
    queue's ``failed`` counter."""
    script = (ROOT / "api" / "ui" / "monitor.js").read_text()
    literals = re.findall(r"""(["'`])(\w+)\1""", script.replace('rate(q, "failed")', ""))
    assert {w for _, w in literals} & (set(STATES) | _CODES) == set()
    assert "/api/v1/states" in script
