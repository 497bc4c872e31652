"""The Redis settings check: an evicting ``maxmemory-policy`` is refused (the supervisor does
not start), missing AOF persistence and a non-``everysec`` fsync are warned about.

The live tests change the session's test Redis with CONFIG SET and always put it back."""

from __future__ import annotations

import contextlib

import pytest

from tests.clitools import run_cli_process
from tracebus.engine.errors import UnsupportedRedis
from tracebus.engine.redis_check import check_redis_config, evaluate


@contextlib.contextmanager
def redis_config(client, **values):
    """CONFIG SET ``values`` (underscores for dashes) for the block, then restore the old ones."""
    names = {k.replace("_", "-"): v for k, v in values.items()}
    old = {name: client.config_get(name)[name] for name in names}
    try:
        for name, value in names.items():
            client.config_set(name, value)
        yield
    finally:
        for name, value in old.items():
            client.config_set(name, value)


# -- the decision, as a pure function -------------------------------------------------------------
@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru",
                                    "volatile-lfu", "volatile-random", "volatile-ttl"])
def test_every_evicting_policy_is_refused_with_the_fix(policy):
    with pytest.raises(UnsupportedRedis) as caught:
        evaluate(policy, aof_enabled=True, appendfsync="everysec", where="Redis at redis://r:6379/0")
    message = str(caught.value)
    assert f"maxmemory-policy {policy}" in message and "redis://r:6379/0" in message
    assert "maxmemory-policy noeviction" in message and "CONFIG SET" in message


def test_recommended_settings_give_no_warning():
    assert evaluate("noeviction", aof_enabled=True, appendfsync="everysec") == []


@pytest.mark.parametrize("aof,fsync,expected", [
    (False, None, "appendonly no"),
    (True, "always", "appendfsync always"),
    (True, "no", "appendfsync no"),
    (True, None, "cannot read appendfsync"),
])
def test_weak_persistence_is_a_warning(aof, fsync, expected):
    warnings = evaluate("noeviction", aof_enabled=aof, appendfsync=fsync)
    assert len(warnings) == 1 and expected in warnings[0]


# -- against the real server ------------------------------------------------------------------------
def test_live_server_with_evicting_policy_is_refused(redis_client, redis_url):
    with redis_config(redis_client, maxmemory_policy="allkeys-lru"):
        with pytest.raises(UnsupportedRedis, match="maxmemory-policy allkeys-lru"):
            check_redis_config(redis_client, redis_url)
    assert redis_client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"


def test_live_server_without_aof_warns(redis_client, redis_url):
    # The test server runs with --appendonly no
    warnings = check_redis_config(redis_client, redis_url)
    assert len(warnings) == 1 and "appendonly no" in warnings[0] and redis_url in warnings[0]


def test_live_server_fsync_setting_is_read(redis_client, redis_url):
    with redis_config(redis_client, appendonly="yes", appendfsync="always"):
        warnings = check_redis_config(redis_client, redis_url)
        assert len(warnings) == 1 and "appendfsync always" in warnings[0]
        redis_client.config_set("appendfsync", "everysec")
        assert check_redis_config(redis_client, redis_url) == []


def test_supervisor_refuses_to_start_on_an_evicting_redis(redis_client, redis_url):
    # Given a Redis that may evict keys
    with redis_config(redis_client, maxmemory_policy="volatile-lru"):
        # When the worker supervisor starts
        result = run_cli_process("worker", "tests.actors", "--processes", "1", timeout_s=30,
                                 env={"REDIS_URL": redis_url, "TRACEBUS_KEY_PREFIX": "tbpolicy"})
    # Then it exits 1 at once with one line naming the setting and the fix, and forks nothing
    assert result.code == 1, result
    assert "Traceback" not in result.err
    line = [ln for ln in result.err.splitlines() if ln.startswith("tracebus: ")]
    assert len(line) == 1 and "maxmemory-policy volatile-lru" in line[0], result.err
    assert "noeviction" in line[0]
    assert "started" not in result.err
    assert not redis_client.exists("tbpolicy:workers")


def test_supervisor_warns_about_missing_persistence(supervisor):
    sup = supervisor(processes=1)
    sup.wait(lambda: "appendonly no" in sup.log(), message="the AOF warning")
    assert "WARNING" in [ln for ln in sup.log().splitlines() if "appendonly no" in ln][0]
