"""Results reused across requests, in the job layer (issue 38): a real Redis, units run here.

A spec with a result key whose completed result is alive and young enough is answered by a
job of its own, created completed, that reads the result's keys (no copy); a partial, failed
or cancelled result is never reused; ``fresh`` and a max age of 0 run again; the max age is
the result's age; the result outlives the job that ran it while a job refers to it, and every
key still expires. The trace kinds' keys (who may reuse, the source named) are checked at the
end; the HTTP paths and the statements counted are in test_reuse.py.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import wait_for
from tests.test_jobstore import Clock, run_all
from tests.topology import ON_NODE_AND_CLUSTER
from tracebus.jobs.errors import BudgetExceeded, JobStateConflict
from tracebus.jobs.keys import JobKeys
from tracebus.jobs.metrics import JobCollector
from tracebus.jobs.spec import JobSpec
from tracebus.jobs.store import JobStore
from tracebus.trace import installed  # noqa: F401  (registers the kinds)
from tracebus.trace import kinds
from tracebus.trace.errors import SourceError
from tracebus.trace.jobkind import JobKind
from tracebus.trace.request import Request
from tracebus.trace.sources import source_identity


def spec(user: str, key: str = "k1", fresh: bool = False, n: int = 6) -> JobSpec:
    return JobSpec(kind="trace-evt", user=user, sections=("history", "materials"),
                   items=[f"cid{i:04d}" for i in range(n)], chunk_items=3, queue="q", actor_name="trace_unit",
                   fingerprint=f"sf-{user}-{key}", result_key=key, fresh=fresh, app={"profile": "query_tool"})


@pytest.fixture
def cfg(settings):
    return settings.replace(job_max_inflight_units=2, user_max_inflight=3)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(redis_client, cfg, clock):
    return JobStore(redis_client, cfg, clock=clock)


def rows(store, job_id: str) -> dict:
    return {s: store.page(job_id, s, 0, 100, False)["rows"] for s in ("history", "materials")}


def counters(redis_client, cfg) -> dict:
    stats = redis_client.hgetall(JobKeys(cfg.key_prefix).stats())
    return {k.decode(): int(v) for k, v in stats.items() if k.startswith(b"reuse:")}


@ON_NODE_AND_CLUSTER
def test_a_completed_result_answers_another_users_identical_request_as_a_job_of_their_own(
        store, redis_client, cfg, clock):
    first = store.create(spec("alice"))
    assert run_all(store, first).state == "completed"
    clock.now += 42

    second = store.create(spec("bob"))

    doc = store.status(second)
    assert second != first and doc["user"] == "bob" and doc["status"] == "completed"
    assert doc["reused_from"].startswith("res-") and doc["result_age_s"] == 42.0 and doc["fresh"] is False
    assert first not in json.dumps(store.detail(second))  # the result is named, never alice's job
    assert rows(store, second) == rows(store, first) and rows(store, first)["history"]
    assert store.take_next_units(second, 10) == []  # nothing to run: no unit is ever sent
    assert [u["state"] for u in store.detail(second)["units"]] == ["done"] * 4
    assert store.status(first)["reused_from"] is None
    # A third request reuses the same result (not the job that reused it), from the same age on.
    third = store.create(spec("carol"))
    assert store.status(third)["reused_from"] == doc["reused_from"]
    assert counters(redis_client, cfg) == {"reuse:miss:trace-evt": 1, "reuse:hit:trace-evt": 2}
    assert store.list_jobs(user="bob")["jobs"][0]["job_id"] == second


def test_a_run_completed_but_not_yet_filed_is_filed_and_reused_by_the_next_identical_request(
        store, redis_client, cfg, monkeypatch):
    # The settle script ends a job before its worker files the result under the result key: a
    # request in between (seen: test_reuse's bob ran the trace again) or after the worker died
    # between the two found the record naming the run as running, and ran the request again.
    monkeypatch.setattr(JobStore, "_file_result", lambda self, job_id: False)  # the worker stops there
    first = store.create(spec("alice"))
    assert run_all(store, first).state == "completed"
    monkeypatch.undo()

    second = store.create(spec("bob"))
    third = store.create(spec("carol"))

    doc = store.status(second)
    assert doc["status"] == "completed" and doc["reused_from"].startswith("res-") and first not in json.dumps(doc)
    assert rows(store, second) == rows(store, first) and rows(store, first)["history"]
    assert store.status(third)["reused_from"] == doc["reused_from"]  # filed once, the same record
    assert counters(redis_client, cfg) == {"reuse:miss:trace-evt": 1, "reuse:hit:trace-evt": 2}


def test_fresh_runs_again_and_the_newest_completed_run_is_the_one_reused(store, redis_client, cfg):
    first = store.create(spec("alice"))
    run_all(store, first)

    fresh = store.create(spec("alice", fresh=True))

    assert fresh != first and store.status(fresh)["status"] == "queued" and store.status(fresh)["fresh"] is True
    run_all(store, fresh)
    reused = store.status(store.create(spec("bob")))
    assert reused["reused_from"] and reused["result_age_s"] == 0.0
    assert counters(redis_client, cfg) == {"reuse:miss:trace-evt": 1, "reuse:fresh:trace-evt": 1,
                                           "reuse:hit:trace-evt": 1}


@pytest.mark.parametrize("ending", ["partial", "cancelled", "running"])
def test_a_partial_cancelled_or_unfinished_result_is_never_reused(store, ending):
    first = store.create(spec("alice"))
    if ending == "partial":
        assert run_all(store, first, fail_units=(1,)).state == "partial"
    elif ending == "cancelled":
        store.cancel(first)

    second = store.create(spec("bob"))

    assert second != first and store.status(second)["status"] == "queued"
    assert store.status(second)["reused_from"] is None


def test_the_max_age_is_the_results_age_and_zero_turns_reuse_off(redis_client, cfg, clock):
    store = JobStore(redis_client, cfg.replace(result_reuse_max_age_s=60), clock=clock)
    first = store.create(spec("alice"))
    run_all(store, first)
    clock.now += 60
    at_max = store.status(store.create(spec("bob")))
    clock.now += 1  # the reuse did not make the result younger
    past = store.create(spec("carol"))

    assert at_max["result_age_s"] == 60.0 and at_max["reused_from"]
    assert store.status(past)["reused_from"] is None and store.status(past)["status"] == "queued"
    off = JobStore(redis_client, cfg.replace(result_reuse_max_age_s=0), clock=clock)
    assert off.status(off.create(spec("dave", key="k2")))["status"] == "queued"
    run_all(off, off.create(spec("erin", key="k3")))
    assert off.status(off.create(spec("fay", key="k3")))["reused_from"] is None


def test_the_reused_result_outlives_the_job_that_ran_it_and_every_key_expires(redis_client, cfg):
    ttl = 2
    store = JobStore(redis_client, cfg.replace(job_ttl_s=ttl))
    keys = JobKeys(cfg.key_prefix)
    first = store.create(spec("alice"))
    run_all(store, first)
    expected = rows(store, first)
    # Reused late in the first job's life: the result gets a fresh full TTL, the first job does not.
    wait_for(lambda: 0 < redis_client.pttl(keys.job(first)) < 1000, 5, interval_s=0.02,
             message="the first job late in its TTL")
    second = store.create(spec("bob"))

    wait_for(lambda: not redis_client.exists(keys.job(first)), 5, interval_s=0.02,
             message="the first job's hash to expire")
    assert rows(store, second) == expected
    assert store.status(second)["reused_from"]
    wait_for(lambda: not list(redis_client.scan_iter(match=f"{cfg.key_prefix}:job:*"))
             and not list(redis_client.scan_iter(match=f"{cfg.key_prefix}:reuse:*")), ttl + 5,
             interval_s=0.1, message="every key of both jobs and the result to expire")


def test_a_result_whose_keys_are_gone_is_not_reused(store, redis_client, cfg):
    first = store.create(spec("alice"))
    run_all(store, first)
    keys = JobKeys(cfg.key_prefix)
    chunk = next(iter(redis_client.scan_iter(match=f"{cfg.key_prefix}:job:{{{first}:history:*")))
    redis_client.delete(chunk)

    second = store.create(spec("bob"))

    assert store.status(second)["status"] == "queued"
    record = redis_client.hgetall(keys.result("k1"))  # it names the new run only
    assert record == {b"running": second.encode()}


def test_metrics_count_hits_joins_misses_and_fresh_runs_per_kind(store, redis_client, cfg):
    first = store.create(spec("alice"))
    assert store.create(spec("alice")) == first  # in flight: joined (single flight)
    run_all(store, first)
    store.create(spec("bob"))
    store.create(spec("bob", key="other", fresh=True))

    families = {f.name: f for f in JobCollector(redis_client, cfg.key_prefix).collect()}
    samples = {(s.labels["kind"], s.labels["outcome"]): s.value
               for s in families["tracebus_result_reuse"].samples}
    assert samples == {("trace-evt", "miss"): 1, ("trace-evt", "join"): 1, ("trace-evt", "hit"): 1,
                       ("trace-evt", "fresh"): 1}


def test_the_kinds_keys_name_the_request_and_the_source_and_the_user_only_when_the_answer_is_theirs(settings):
    events = kinds.named("events")
    req = Request("query_tool", ["A", "B"], ["history"], user="alice")
    mine, theirs = events.fingerprint(req, settings), events.fingerprint(Request(**{**_fields(req), "user": "bob"}),
                                                                         settings)
    elsewhere = events.fingerprint(req, settings.replace(sqlite_path="/elsewhere.db"))
    reordered = events.fingerprint(Request("query_tool", ["B", "A"], ["history"], user="alice"), settings)

    assert mine == theirs and len({mine, elsewhere, reordered}) == 3
    assert events.fingerprint(req, settings.replace(result_reuse_max_age_s=0)) == ""

    class Private(JobKind):
        name, caller_dependent = "private-example", True

    private = Private()
    assert private.result_key(settings, "alice", "q") != private.result_key(settings, "bob", "q")
    oracle = settings.replace(source="oracle", oracle_dsn="scott/tiger@db.example:1521/DWH")
    assert "tiger" not in source_identity(oracle) and "db.example:1521/dwh" in source_identity(oracle)
    for dsn in ("postgresql://scott:tiger@DB.example:5433/dwh?sslmode=require&password=tiger",
                "host=db.example port=5433 dbname=dwh user=scott password=tiger"):
        named = source_identity(settings.replace(source="postgres", postgres_dsn=dsn))
        assert named == "postgres:db.example:5433/dwh", dsn
    # A DSN that cannot be read is the source's failure (503), not a 500, and keeps its password.
    for dsn in ("postgresql://scott:tiger@db.example:notaport/dwh", "postgresql://scott:tiger@[db/dwh",
                "host=db.example password='tiger"):
        with pytest.raises(SourceError) as e:
            source_identity(settings.replace(source="postgres", postgres_dsn=dsn))
        assert "TRACEBUS_POSTGRES_DSN cannot be read" in str(e.value) and "tiger" not in str(e.value), dsn


def _fields(req: Request) -> dict:
    return {f: getattr(req, f) for f in req.__slots__}


def test_a_reuse_charges_the_results_bytes_to_the_user_who_keeps_it_alive_once(store, redis_client, cfg):
    # Given alice's completed result, charged to her as it was written
    first = store.create(spec("alice", key="budget"))
    assert run_all(store, first).state == "completed"
    alice = store.budget.spent("alice")
    assert alice > 0
    # When bob's identical request reuses it, twice
    store.create(spec("bob", key="budget"))
    bob = store.budget.spent("bob")
    store.create(spec("bob", key="budget", n=6))
    # Then bob is charged the chunks the reuse keeps alive another TTL, once; alice's stay hers
    assert 0 < bob < alice and store.budget.spent("bob") == bob
    assert store.budget.spent("alice") == alice
    # and a user whose budget cannot hold them is refused the reuse, as the run would be
    tight = JobStore(redis_client, cfg.replace(user_max_bytes=bob // 2), clock=store.clock)
    with pytest.raises(BudgetExceeded):
        tight.create(spec("carol", key="budget"))
@ON_NODE_AND_CLUSTER
def test_another_users_identical_request_in_flight_joins_it_and_ends_with_its_result(store, redis_client, cfg):
    first = store.create(spec("alice"))
    assert store.create(spec("alice")) == first  # the user's own: that job

    joined = store.create(spec("bob"))

    assert joined != first and store.status(joined)["user"] == "bob"
    assert first not in json.dumps(store.detail(joined))
    store.take_next_units(first, 1)
    unit = store.begin_unit(first, 0)
    writer = store.chunk_writer(first, 0, unit)
    writer.write(["CONTAINERID", "N"], [["c", 1]])
    store.finish_unit(first, 0, unit, writer.commit())
    following = store.status(joined)
    assert following["status"] == "running" and following["progress"]["units_done"] == 1  # live
    assert store.page(joined, "history", 0, 10, True)["rows"] == [{"CONTAINERID": "c", "N": 1}]
    assert store.take_next_units(joined, 10) == []  # it runs nothing itself
    run_all(store, first)

    ended = store.status(joined)
    assert ended["status"] == "completed" and ended["reused_from"].startswith("res-")
    assert rows(store, joined) == rows(store, first)
    assert ended["reused_from"] == store.status(store.create(spec("carol")))["reused_from"]
    assert counters(redis_client, cfg)["reuse:join:trace-evt"] == 2
    written = list(redis_client.scan_iter(match=f"{cfg.key_prefix}:job:*")) + [JobKeys(cfg.key_prefix).result("k1")]
    assert JobKeys(cfg.key_prefix).job_joined(first).encode() in written
    assert all(redis_client.ttl(k) > 0 for k in written)  # every key expires


def test_a_joined_job_fails_when_the_job_it_joined_does_not_complete_and_its_cancel_is_its_own(store):
    first = store.create(spec("alice"))
    cancelled_by_bob = store.create(spec("bob"))
    joined = store.create(spec("carol"))

    store.cancel(cancelled_by_bob)
    assert store.status(first)["status"] == "queued"  # bob's cancel is his alone
    store.cancel(first)

    ended = store.status(joined)
    assert ended["status"] == "failed" and "ended cancelled" in ended["error"] and first not in ended["error"]
    assert store.status(cancelled_by_bob)["status"] == "cancelled"
    with pytest.raises(JobStateConflict, match="send the request again"):
        store.retry(joined)
    # Nothing in flight and no result: the next identical request runs.
    assert store.status(store.create(spec("dave")))["status"] == "queued"
