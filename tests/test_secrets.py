"""No Redis password in a log line or an error (issue 24, finding 8)."""

from __future__ import annotations

import traceback

import pytest

from tracebus.engine.wire import check_redis_version
from tracebus.engine.connection import redact
from tracebus.engine.errors import UnsupportedRedis
from tracebus.engine.redis_check import check_redis_config

SECRET = "s3cret-pw"


@pytest.mark.parametrize("url, shown", [
    (f"redis://:{SECRET}@h:6380/0", "redis://:***@h:6380/0"),
    (f"redis://app:{SECRET}@h:6380/0?socket_timeout=3", "redis://app:***@h:6380/0?socket_timeout=3"),
    (f"redis+sentinel://:{SECRET}@a:1,b:2/m?sentinel_password={SECRET}&x=1",
     "redis+sentinel://:***@a:1,b:2/m?sentinel_password=***&x=1"),
    (f"redis://h:6380/0?password={SECRET}", "redis://h:6380/0?password=***"),
    (f"unix:///run/redis.sock?db=1&password={SECRET}", "unix:///run/redis.sock?db=1&password=***"),
    ("redis://h:6380/0", "redis://h:6380/0"),
])
def test_redact_hides_every_form_of_password(url, shown):
    assert redact(url) == shown


def test_the_version_check_names_the_server_without_its_password():
    with pytest.raises(UnsupportedRedis) as e:
        check_redis_version("6.2.0", f"redis://:{SECRET}@h:1/0")
    assert SECRET not in str(e.value) and "redis://:***@h:1/0" in str(e.value)


def test_the_settings_check_warns_without_the_password(redis_client):
    warnings = check_redis_config(redis_client, f"redis://:{SECRET}@127.0.0.1:1/0")
    assert warnings, "the suite's server runs without AOF: there is a warning to read"
    assert all(SECRET not in w and "redis://:***@127.0.0.1:1/0" in w for w in warnings), warnings


@pytest.mark.parametrize("dsn", [
    f"postgresql://u:{SECRET}@[bad/db",  # libpq quotes the whole URI
    "postgresql://u:s3cret%zz-pw@127.0.0.1:1/db",  # it quotes the token it could not decode
    f"host=127.0.0.1 port=notaport password={SECRET}",
    f"postgresql://u@127.0.0.1:notaport/db?password={SECRET}",
])
def test_a_postgres_error_never_carries_the_dsn_password(dsn):
    import psycopg

    from tracebus.trace.sources.postgres import translate

    with pytest.raises(psycopg.Error) as e:
        psycopg.connect(dsn, connect_timeout=1).close()
    try:
        raise translate(e.value, dsn) from e.value
    except Exception as error:  # a dead letter keeps the whole chain
        shown = "".join(traceback.format_exception(error))
    assert "s3cret" not in shown and "SourceError: postgres: " in shown, shown


def test_a_quoted_postgres_url_loses_its_password_even_without_the_dsn():
    from tracebus.trace.sources.postgres import redact

    assert redact(f'in URI: "postgresql://u:{SECRET}@[bad/db"') == 'in URI: "postgresql://u:***@[bad/db"'
