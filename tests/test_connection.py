"""The connection factory: the topology chosen by REDIS_URL's scheme, bad URLs as one ConfigError."""

from __future__ import annotations

import pytest

from tracebus.engine.connection import parse_sentinel_url, reachable, redact, redis_client, topology
from tracebus.errors import ConfigError


@pytest.mark.parametrize("url, kind", [
    ("redis://h:6379/0", "single"), ("rediss://h:6380/1", "single"), ("unix:///tmp/r.sock", "single"),
    ("redis+sentinel://a:26379,b:26380/mymaster/2", "sentinel"), ("redis+cluster://a:7000,b:7001", "cluster"),
])
def test_topology_by_scheme(url, kind):
    assert topology(url) == kind


def test_sentinel_url_parsed():
    p = parse_sentinel_url("redis+sentinel://u:s%40cret@a:26379,[::1]:26380,c/mymaster/3?sentinel_password=sp")
    assert p.hosts == [("a", 26379), ("::1", 26380), ("c", 26379)]
    assert (p.master, p.db, p.username, p.password, p.sentinel_password) == ("mymaster", 3, "u", "s@cret", "sp")


@pytest.mark.parametrize("url, words", [
    ("http://h:6379", "must start with"), ("localhost:6379", "must start with"),
    ("redis+sentinel://a:26379", "must name the master"), ("redis+sentinel://a:26379/m/x", "db must be a number"),
    ("redis+sentinel://a:port/m", "bad port"), ("redis+sentinel:///m", "names no host"),
    ("redis://h:6379/notadb", "db must be a number"), ("redis://h:99999/0", "is invalid"),
    ("redis://:6379/0", "no host"),
])
def test_bad_urls_are_one_config_error(url, words):
    with pytest.raises(ConfigError, match=words):
        redis_client(url)


def test_passwords_never_printed():
    assert redact("redis://user:secret@h:1/0") == "redis://user:***@h:1/0"
    with pytest.raises(ConfigError) as e:
        redis_client("redis+sentinel://:secret@a:26379")
    assert "secret" not in str(e.value)


def test_one_node_client_talks(redis_server):
    client = redis_client(redis_server.url)
    assert client.ping() and reachable(redis_server.url)
    client.close()


def test_nothing_listening_is_unreachable_not_an_error():
    from tracebus.redis_proc import free_port

    assert not reachable(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5)
    assert not reachable(f"redis+sentinel://127.0.0.1:{free_port()}/mymaster", timeout_s=0.5)


@pytest.mark.parametrize("url", ["http://h:6379", "redis+sentinel://a:26379", "redis://h:6379/notadb"])
def test_a_bad_redis_url_is_one_line_from_the_cli(url):
    from tests.clitools import run_cli

    result = run_cli("status", env={"REDIS_URL": url})
    assert result.code != 0 and "Traceback" not in result.err
    assert result.err.startswith("tracebus: ") and len(result.err.strip().splitlines()) == 1, result.err
    assert "REDIS_URL" in result.err
