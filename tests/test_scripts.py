"""The Lua scripts' KEYS/ARGV contracts (engine and job layers): declared once in each
header, read by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracebus.engine.keys import GROUP
from tracebus.engine.scripts import ENGINE_SCRIPTS, Signature
from tracebus.jobs.scripts import JOB_SCRIPTS, script

ROOT = Path(__file__).resolve().parent.parent / "tracebus"
SCRIPTS = [(library, p.stem) for library, folder in ((ENGINE_SCRIPTS, "engine"), (JOB_SCRIPTS, "jobs"))
           for p in sorted((ROOT / folder / "lua").glob("*.lua")) if not p.stem.startswith("_")]


def _body(library, name: str) -> str:
    lines = (ROOT / library.package.split(".")[1] / "lua" / f"{name}.lua").read_text().splitlines()
    return "\n".join(line.split("--", 1)[0] for line in lines)


@pytest.mark.parametrize(("library", "name"), SCRIPTS, ids=[f"{lib.package}.{n}" for lib, n in SCRIPTS])
def test_every_declared_slot_is_what_the_body_reads(library, name):
    sig = library.signature(name)
    assert sig.keys, f"{name}.lua declares no KEYS"
    body = _body(library, name)
    used_keys = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", body)}
    used_args = {int(n) for n in re.findall(r"ARGV\[(\d+)\]", body)}
    open_keys = sig.keys[-1].size is None  # an open run of KEYS is read at computed indexes
    if not open_keys:
        assert max(used_keys, default=0) <= sum(s.size for s in sig.keys)
    open_tail = sig.args and sig.args[-1].size is None
    if not open_tail:
        assert max(used_args, default=0) <= len(sig.args)
    # Each single ARGV is read by its number: none is declared and passed for nothing.
    for slot in sig.args:
        if slot.size == 1:
            assert slot.first in used_args, f"{name}.lua: ARGV[{slot.first}] {slot.name} is never read"


def test_a_header_out_of_order_is_refused():
    with pytest.raises(ValueError, match=r"KEYS\[3\] b is out of order"):
        Signature.parse("x", "-- KEYS[1] a\n-- KEYS[3] b\n")
    with pytest.raises(ValueError, match=r"ARGV\[1\] rest is out of order"):
        Signature.parse("x", "-- KEYS[1] a\n-- ARGV[1..] rest\n-- ARGV[2] b\n")
    with pytest.raises(ValueError, match="a ARGV name repeats"):
        Signature.parse("x", "-- KEYS[1] a\n-- ARGV[1] a\n-- ARGV[2] a\n")
    # Only the opening comment block is the header.
    sig = Signature.parse("x", "-- KEYS[1] a\n-- KEYS[2..4] run\nlocal x = 1\n-- KEYS[5] late\n")
    assert sig.key_names() == ("a", "run") and sig.keys[1].size == 3


def test_values_are_laid_out_in_the_declared_order():
    sig = Signature.parse("x", "-- KEYS[1] a\n-- KEYS[2..3] pair\n-- KEYS[4] b\n-- ARGV[1] n\n-- ARGV[2..] rest\n")
    assert sig.lay_out("x", "KEYS", sig.keys, {"b": "B", "pair": ["P1", "P2"], "a": "A"}) == ["A", "P1", "P2", "B"]
    assert sig.lay_out("x", "ARGV", sig.args, {"rest": [], "n": 1}) == [1]
    with pytest.raises(TypeError, match=r"missing \['b'\], not declared \['c'\]"):
        sig.lay_out("x", "KEYS", sig.keys, {"a": 1, "pair": [1, 2], "c": 3})
    with pytest.raises(TypeError, match="pair takes 2 values, not 1"):
        sig.lay_out("x", "KEYS", sig.keys, {"a": 1, "pair": [1], "b": 3})


def test_a_script_runs_with_its_named_keys_and_args(redis_client):
    """user_release through its declared names, on the suite's real redis-server."""
    redis_client.set("{t}:sf", "job-1")
    redis_client.zadd("{t}:user", {"job-1": 1})
    release = script(redis_client, "user_release")
    with pytest.raises(TypeError):
        release({"singleflight": "{t}:sf"}, {"job_id": "job-1", "inflight": 1, "singleflight": 1})
    assert release({"user_jobs": "{t}:user", "singleflight": "{t}:sf"},
                   {"singleflight": 1, "job_id": "job-1", "inflight": 0}) == 1
    assert redis_client.get("{t}:sf") is None and redis_client.zscore("{t}:user", "job-1") == 1


def test_every_engine_script_is_registered_by_the_broker(broker):
    """The broker's scripts are the engine's whole lua/ folder: none is left unnamed."""
    engine = {n for lib, n in SCRIPTS if lib is ENGINE_SCRIPTS}
    assert set(broker._scripts) == engine and len(engine) == 10


def test_an_engine_script_runs_with_its_named_keys_and_args(redis_client):
    """renew through its declared names, on the suite's real redis-server: a consumer's held
    entry has its idle time reset; a missing or extra name is refused before Redis is asked."""
    stream = "{t}:s"
    redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    redis_client.xadd(stream, {"m": b"x"})
    redis_client.xreadgroup(GROUP, "c1", {stream: ">"}, count=1)
    renew = ENGINE_SCRIPTS.register(redis_client, "renew")
    with pytest.raises(TypeError, match=r"renew: ARGV missing \['count'\], not declared \['limit'\]"):
        renew({"stream": stream}, {"group": GROUP, "consumer": "c1", "limit": 10})
    assert renew({"stream": stream}, {"consumer": "c1", "count": 10, "group": GROUP}) == 1
    assert renew({"stream": stream}, {"consumer": "c2", "count": 10, "group": GROUP}) == 0
