"""The web monitor's JSON and files: /api/v1/me, queues, workers, redis, dead letters, / and /ui/.

Over a real supervisor (``tests.actors`` on queue ``tests``, 2 workers) and the session's
redis-server; the app is ``create_app`` in this process, the caller named by the trusted-proxy
header (the test client's peer is 127.0.0.1) or by a bearer token. The page itself is driven in
a real browser by tests/test_monitor_browser.py.

One supervisor serves the whole module (under a key prefix of its own, which no test flushes):
no test here needs a fresh one, only no dead letter left by an earlier test (``running``
purges them first) and counts taken from where an earlier test left them.
"""

from __future__ import annotations

import os
import sys
import time

import jsonschema
import pytest
from falcon import testing

import tests.actors as actors
from api.app import create_app
from api.openapi import document
from api.settings import ApiSettings
from tests.conftest_proc import SUPERVISOR_ENV, Supervised
from tests.helpers import wait_for
from tests.redis_server import free_port
from tracebus.engine.actor import set_broker
from tracebus.engine.broker import Broker
from tracebus.engine.connection import redis_client as connect_url
from tracebus.engine.message import Message

OPERATOR = "ops"


def start_supervisor(redis_url: str, log_path) -> Supervised:
    """``tracebus worker tests.actors --processes 2`` on a key prefix of its own (nothing flushed)."""
    prefix = f"tbmon{os.urandom(4).hex()}"
    broker = Broker(ApiSettings.from_env({}, redis_url=redis_url, key_prefix=prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE", "REDIS_URL", "NOTIFY_SOCKET"))}
    env.update(SUPERVISOR_ENV, REDIS_URL=redis_url, TRACEBUS_KEY_PREFIX=prefix)
    argv = [sys.executable, "-m", "tracebus", "worker", "tests.actors", "--processes", "2"]
    sup = Supervised(broker, log_path, argv, env)
    try:
        sup.wait_workers(2)
    except BaseException:
        stop_supervisor(sup)
        raise
    return sup


def stop_supervisor(sup: Supervised) -> None:
    sup.kill()
    sup.broker.close()


@pytest.fixture(scope="module")
def shared_supervisor(redis_server, tmp_path_factory):
    """The module's supervisor."""
    sup = start_supervisor(redis_server.url, tmp_path_factory.mktemp("monitor") / "supervisor.log")
    yield sup
    stop_supervisor(sup)


@pytest.fixture
def supervisor(shared_supervisor):
    """The module's supervisor, its broker the one the actors send through, with no dead letter
    and nothing waiting on ``tests`` (what an earlier test left)."""
    sup = shared_supervisor
    set_broker(sup.broker)
    # First nothing in flight (a message an earlier test requeued may still be failing again),
    # then no dead letter.
    def idle() -> bool:
        stats = sup.broker.queue_stats("tests")
        return stats["length"] == stats["pending"] == stats["delayed"] == 0
    sup.wait(idle, 10, "nothing waiting, pending or delayed on tests")
    sup.broker.purge_dead("tests")
    yield sup
    set_broker(None)


@pytest.fixture
def app_for(supervisor):
    """Factory: a TestClient over the supervisor's Redis and prefix, calling as ``user``."""
    def make(broker, user: str | None = OPERATOR, **overrides):
        settings = broker.settings.replace(trusted_proxies="127.0.0.1", api_admins=f"{OPERATOR},root",
                                           rate_limits="off", **overrides)
        headers = {settings.user_header: user} if user else None
        return testing.TestClient(create_app(settings, broker), headers=headers)
    return make


@pytest.fixture
def running(supervisor, app_for):
    return supervisor, app_for(supervisor.broker)


def dead_records(client, **params) -> list[dict]:
    resp = client.simulate_get("/api/v1/dead-letters", params=params or None)
    assert resp.status_code == 200, resp.text
    return resp.json["records"]


# -- the page ---------------------------------------------------------------------------------
def test_the_page_and_its_files_are_served_to_anybody_under_a_same_origin_policy(supervisor, app_for):
    client = app_for(supervisor.broker, user=None, api_tokens="s3cret:alice")  # tokens on: the API wants one

    page, ui, slash, script, style = (client.simulate_get(p) for p in ("/", "/ui", "/ui/", "/ui/monitor.js",
                                                                        "/ui/monitor.css"))
    missing = client.simulate_get("/ui/secrets.txt")
    data = client.simulate_get("/api/v1/queues")

    assert page.status_code == ui.status_code == slash.status_code == 200 and page.text == ui.text == slash.text
    assert page.headers["content-type"].startswith("text/html")
    assert '<script src="/ui/monitor.js"' in page.text and "<script>" not in page.text  # nothing inline
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert "sessionStorage" in script.text and "Authorization" in script.text
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert missing.status_code == 404 and missing.json["error"]["code"] == "NOT_FOUND"
    assert data.status_code == 401  # the data behind it is not open


# -- identity ---------------------------------------------------------------------------------
def test_me_names_the_caller_by_header_or_token_and_says_who_is_an_operator(supervisor, app_for):
    by_header = app_for(supervisor.broker, user=None)
    with_tokens = app_for(supervisor.broker, user=None, api_tokens="t-root:root,t-bob:bob")

    operator = by_header.simulate_get("/api/v1/me", headers={"X-User-Id": OPERATOR}).json
    alice = by_header.simulate_get("/api/v1/me", headers={"X-User-Id": "alice"}).json
    anonymous = by_header.simulate_get("/api/v1/me").json
    root = with_tokens.simulate_get("/api/v1/me", headers={"Authorization": "Bearer t-root"}).json
    bob = with_tokens.simulate_get("/api/v1/me", headers={"Authorization": "Bearer t-bob"}).json
    nobody = with_tokens.simulate_get("/api/v1/me")
    wrong = with_tokens.simulate_get("/api/v1/me", headers={"Authorization": "Bearer nope"})

    assert operator == {"user": OPERATOR, "anonymous": False, "admin": True}
    assert alice == {"user": "alice", "anonymous": False, "admin": False}
    assert anonymous == {"user": "anon:127.0.0.1", "anonymous": True, "admin": False}
    assert root["admin"] is True and bob == {"user": "bob", "anonymous": False, "admin": False}
    assert nobody.status_code == wrong.status_code == 401
    assert nobody.json["error"]["code"] == "UNAUTHORIZED"


def test_states_give_the_monitor_the_words_it_shows(supervisor, app_for):
    client = app_for(supervisor.broker, user=None, api_tokens="t-bob:bob")
    doc = client.simulate_get("/api/v1/states", headers={"Authorization": "Bearer t-bob"}).json

    assert doc == {"states": ["queued", "running", "completed", "partial", "failed", "cancelled"],
                   "active": ["queued", "running"], "retryable": ["partial", "failed", "cancelled"],
                   "with_result": ["completed", "partial"],
                   "codes": {"partial": "EVENTS_PARTIAL_FAILURE", "cancelled": "JOB_CANCELLED"}}
    assert client.simulate_get("/api/v1/states").status_code == 401  # behind the same identity as /me


# -- queues -------------------------------------------------------------------------------------
def test_queues_show_waiting_messages_their_lag_and_then_what_the_workers_did(supervisor, app_for):
    broker = supervisor.broker
    client = app_for(broker)
    # A queue nobody reads: its messages wait, and the oldest one's age is the lag.
    broker.enqueue_many([Message("nobody-reads", "record", (n,), {}, {}) for n in range(3)])
    time.sleep(0.3)

    doc = client.simulate_get("/api/v1/queues").json
    by_name = {q["queue"]: q for q in doc["queues"]}
    idle = by_name["nobody-reads"]
    assert (idle["length"], idle["pending"], idle["delayed"], idle["dead"]) == (3, 0, 0, 0)
    assert 300 <= idle["lag_ms"] < 30_000
    assert broker.settings.queue in by_name  # the trace queue is listed before anybody used it

    before = by_name["tests"]  # the module's supervisor: counts go on from earlier tests
    for n in range(5):
        actors.record.send(n)
    done = wait_for(lambda: q if (q := {q["queue"]: q for q in client.simulate_get("/api/v1/queues")
                                        .json["queues"]}["tests"])["processed"] >= before["processed"] + 5
                    else None, 15, message="5 messages processed on tests")
    assert (done["length"], done["lag_ms"], done["failed"]) == (0, 0, before["failed"])
    assert abs(doc["time_ms"] - time.time() * 1000) < 5000  # Redis' clock


# -- workers ------------------------------------------------------------------------------------
def test_workers_are_listed_per_host_with_their_current_message_rss_done_count_and_age(redis_server, tmp_path,
                                                                                     app_for):
    # A supervisor of its own: the done counts start at 0 (the module's one has done other
    # tests' messages, and its workers publish their counts about once a second, so a count
    # read before this test's messages may already be behind).
    sup = start_supervisor(redis_server.url, tmp_path / "supervisor.log")
    set_broker(sup.broker)
    try:
        check_workers(sup, app_for(sup.broker))
    finally:
        set_broker(None)
        stop_supervisor(sup)


def check_workers(sup: Supervised, client) -> None:
    actors.slow_record.send(1, 3)  # one worker busy for 3 s
    actors.record.send(2)

    def busy():
        hosts = client.simulate_get("/api/v1/workers").json["hosts"]
        workers = [w for h in hosts for w in h["workers"]]
        return hosts if any((w["current"] or "").startswith("slow_record:") for w in workers) else None
    hosts = wait_for(busy, 10, message="a worker running slow_record")

    [host] = hosts
    assert host["host"] and {w["pid"] for w in host["workers"]} == sup.workers()
    for w in host["workers"]:
        assert w["queues"] == ["tests"] and w["rss_bytes"] > 10 * 1024 * 1024
        assert w["age_s"] is not None and w["age_s"] >= 0 and w["seen_s_ago"] < 30
    wait_for(lambda: sum(w["done"] for w in client.simulate_get("/api/v1/workers").json["hosts"][0]["workers"])
             >= 2, 15, message="both messages done")


# -- Redis --------------------------------------------------------------------------------------
def test_redis_health_shows_memory_against_maxmemory_policy_and_persistence(supervisor, app_for, redis_server):
    client = app_for(supervisor.broker)
    redis_client = connect_url(redis_server.url)  # not the flushing fixture: the module's supervisor uses this Redis
    before = redis_client.config_get("maxmemory")["maxmemory"]
    redis_client.config_set("maxmemory", 512 * 1024 * 1024)
    try:
        doc = client.simulate_get("/api/v1/redis").json
    finally:
        redis_client.config_set("maxmemory", before)
    unlimited = client.simulate_get("/api/v1/redis").json

    info = redis_client.info()
    memory = doc["memory"]
    assert doc["version"] == info["redis_version"] and doc["uptime_s"] >= 0
    assert memory["max_bytes"] == 512 * 1024 * 1024 and 0 < memory["used_bytes"] < memory["max_bytes"]
    assert memory["used_ratio"] == pytest.approx(memory["used_bytes"] / memory["max_bytes"], abs=0.01)
    assert memory["policy"] == info["maxmemory_policy"]
    assert unlimited["memory"]["max_bytes"] == 0 and unlimited["memory"]["used_ratio"] is None
    persistence = doc["persistence"]
    assert persistence["rdb_save_points"] == redis_client.config_get("save")["save"]
    assert persistence["aof_enabled"] is bool(info["aof_enabled"])
    assert persistence["rdb_last_bgsave_status"] == info["rdb_last_bgsave_status"]
    redis_client.close()


# -- dead letters ---------------------------------------------------------------------------------
def test_dead_letters_are_for_operators_only(running):
    sup, _ = running
    user = testing.TestClient(create_app(sup.broker.settings.replace(trusted_proxies="127.0.0.1",
                                                                     api_admins=OPERATOR), sup.broker),
                              headers={"X-User-Id": "alice"})

    listing = user.simulate_get("/api/v1/dead-letters")
    purge = user.simulate_post("/api/v1/dead-letters/purge", json={"queue": "tests", "all": True})

    for resp in (listing, purge):
        assert resp.status_code == 403 and resp.json["error"]["code"] == "FORBIDDEN"
        assert "alice is not an operator" in resp.json["error"]["message"]


def test_an_operator_reads_the_traceback_requeues_and_purges_dead_letters(running):
    _, client = running
    actors.always_fails.send(7)
    [record] = wait_for(lambda: r if len(r := dead_records(client)) == 1 else None, 15,
                        message="a dead letter")

    assert (record["queue"], record["actor"], record["args"]) == ("tests", "always_fails", [7])
    assert record["reason"] == "gave up after 0 retries: ValueError: broken message 7"
    assert "Traceback (most recent call last)" in record["traceback"]
    assert 'raise ValueError(f"broken message {n}")' in record["traceback"]
    assert isinstance(record["deliveries"], int) and abs(record["time"] - time.time()) < 60
    assert dead_records(client, queue="tests") == [record]

    # Requeued, it runs again (and, always failing, is dead-lettered again as a new record).
    requeued = client.simulate_post("/api/v1/dead-letters/requeue", json={"queue": "tests", "ids": [record["id"]]})
    assert requeued.status_code == 200, requeued.text
    assert [r["id"] for r in requeued.json["requeued"]] == [record["id"]] and requeued.json["skipped"] == []
    again = client.simulate_post("/api/v1/dead-letters/requeue", json={"queue": "tests", "ids": [record["id"]]})
    assert again.json["skipped"] == [{"id": record["id"], "reason": "missing"}]
    [second] = wait_for(lambda: r if len(r := dead_records(client)) == 1 and r[0]["id"] != record["id"] else None,
                        15, message="the requeued message dead again")

    actors.always_fails.send(8)
    wait_for(lambda: len(dead_records(client)) == 2, 15, message="a second dead letter")
    one = client.simulate_post("/api/v1/dead-letters/purge",
                               json={"queue": "tests", "ids": [second["id"], "1-1"]}).json
    assert one == {"queue": "tests", "deleted": 1, "missing": ["1-1"]}
    rest = client.simulate_post("/api/v1/dead-letters/purge", json={"queue": "tests", "all": True}).json
    assert rest == {"queue": "tests", "deleted": 1, "missing": []}
    assert dead_records(client) == []


@pytest.mark.parametrize("body, says", [
    ({"queue": "tests"}, 'give either "ids"'),
    ({"queue": "tests", "ids": ["1-0"], "all": True}, 'give either "ids"'),
    ({"queue": "tests", "ids": []}, "ids must be a list of 1 to 1000"),
    ({"queue": "tests", "ids": ["'; DROP"]}, "ids must be a list of 1 to 1000"),
    ({"queue": "tests", "all": "yes"}, "all must be true or false"),
    ({"queue": 5, "all": True}, "queue must be one of"),
    (["tests"], "body must be a JSON object"),
])
def test_bad_dead_letter_actions_are_400_with_a_message(running, body, says):
    _, client = running

    resp = client.simulate_post("/api/v1/dead-letters/purge", json=body)

    assert resp.status_code == 400 and resp.json["error"]["code"] == "INVALID_PARAMS", resp.text
    assert says in resp.json["error"]["message"]


@pytest.mark.parametrize("body", [
    {"queue": "tests", "ids": ["1-1"]}, {"queue": "tests", "ids": ["1-1", "1-1"], "all": False},
    {"queue": "tests", "all": True}, {"queue": "tests", "all": True, "ids": None},
    {"queue": "tests"}, {"queue": "tests", "all": False}, {"queue": "tests", "ids": None},
    {"queue": "tests", "ids": []}, {"queue": "tests", "ids": ["1-1"], "all": True},
    {"queue": "tests", "ids": ["1-1\n"]}, {"queue": "tests", "ids": ["\u0661-\u0660"]},
    {"queue": "tests", "ids": ["1-1"] * 1001}, {"queue": "tests", "all": 1},
])
def test_a_dead_letter_action_body_is_accepted_exactly_when_its_schema_says(running, body):
    """DeadLetterTargets is derived from the route's declaration: the two agree, even on the
    rule across ids and all (a false all beside ids, a null ids beside a true all)."""
    sup, client = running
    spec = document(sup.broker.settings)
    schema = {"$ref": "#/components/schemas/DeadLetterTargets", "components": spec["components"]}

    resp = client.simulate_post("/api/v1/dead-letters/purge", json=body)

    assert resp.status_code in (200, 400), resp.text
    assert (resp.status_code == 200) == jsonschema.Draft202012Validator(schema).is_valid(body), resp.text


def test_dead_letter_actions_need_a_json_body_and_listing_checks_its_parameters(running):
    _, client = running

    form = client.simulate_post("/api/v1/dead-letters/purge", body='{"queue": "tests", "all": true}',
                                headers={"Content-Type": "text/plain"})
    empty = client.simulate_post("/api/v1/dead-letters/purge", body="", headers={"Content-Type": "application/json"})
    limit = client.simulate_get("/api/v1/dead-letters", params={"limit": "0"})
    queue = client.simulate_get("/api/v1/dead-letters", params={"queue": "nope"})

    assert form.status_code == 415 and "application/json" in form.json["error"]["message"]
    assert empty.status_code == 400 and "empty" in empty.json["error"]["message"]
    assert limit.status_code == 400 and "limit" in limit.json["error"]["message"]
    assert queue.status_code == 404 and "no queue named 'nope'" in queue.json["error"]["message"]


def test_the_answers_conform_to_the_documented_schemas(running):
    sup, client = running
    spec = document(sup.broker.settings)
    actors.always_fails.send(9)
    [record] = wait_for(lambda: r if len(r := dead_records(client)) == 1 else None, 15, message="a dead letter")

    def conforms(schema: str, instance) -> None:
        root = {"$ref": f"#/components/schemas/{schema}", "components": spec["components"]}
        jsonschema.Draft202012Validator(root).validate(instance)

    conforms("Me", client.simulate_get("/api/v1/me").json)
    conforms("JobStates", client.simulate_get("/api/v1/states").json)
    conforms("QueueList", client.simulate_get("/api/v1/queues").json)
    conforms("WorkerList", client.simulate_get("/api/v1/workers").json)
    conforms("RedisHealth", client.simulate_get("/api/v1/redis").json)
    conforms("DeadLetterList", client.simulate_get("/api/v1/dead-letters").json)
    conforms("DeadLetterRequeued", client.simulate_post("/api/v1/dead-letters/requeue",
                                                        json={"queue": "tests", "ids": [record["id"], "1-0"]}).json)
    conforms("DeadLetterPurged", client.simulate_post("/api/v1/dead-letters/purge",
                                                      json={"queue": "tests", "all": True}).json)
    conforms("Error", client.simulate_get("/api/v1/dead-letters", headers={"X-User-Id": "eve"}).json)


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/api/v1/queues", None), ("GET", "/api/v1/workers", None), ("GET", "/api/v1/redis", None),
    ("GET", "/api/v1/dead-letters", None),
    ("POST", "/api/v1/dead-letters/purge", {"queue": "tests", "all": True}),
])
def test_with_redis_down_the_monitors_data_is_503_and_its_page_still_loads(method, path, body):
    # Settings of their own (not the ``settings`` fixture, which flushes the Redis the module's
    # supervisor uses): a Redis on a port nothing listens on.
    down = ApiSettings.from_env({}, redis_url=f"redis://127.0.0.1:{free_port()}/0", key_prefix="tbtest",
                                trusted_proxies="127.0.0.1", api_admins=OPERATOR)
    broker = Broker(down)
    try:
        client = testing.TestClient(create_app(down, broker), headers={"X-User-Id": OPERATOR})
        resp = client.simulate_request(method, path, json=body)
        page = client.simulate_get("/")
    finally:
        broker.close()

    assert resp.status_code == 503, resp.text
    assert resp.json["error"]["code"] == "SERVICE_UNAVAILABLE" and int(resp.headers["retry-after"]) > 0
    assert page.status_code == 200


def test_a_dead_letter_action_on_no_such_queue_is_404_naming_the_queues(running):
    _, client = running

    resp = client.simulate_post("/api/v1/dead-letters/purge", json={"queue": "no-such-queue", "all": True})

    assert resp.status_code == 404 and resp.json["error"]["code"] == "NOT_FOUND", resp.text
    assert "no queue named 'no-such-queue'" in resp.json["error"]["message"]
    assert client.simulate_get("/api/v1/dead-letters", params={"queue": "no-such-queue"}).status_code == 404
