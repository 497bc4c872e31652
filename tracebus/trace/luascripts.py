"""Loading of the job and result Lua scripts, and translation of redis errors.

The scripts live in ``tracebus/lua/job_*.lua`` and ``result_*.lua``; each opens with its
KEYS/ARGV contract. :func:`script` registers one on a client (EVALSHA with an EVAL
fallback, done by redis-py) with its preludes (:data:`tracebus.scripts.PRELUDES`);
:func:`redis_errors` (from :mod:`tracebus.broker`) turns driver errors into the tracebus
hierarchy at this boundary.
"""

from __future__ import annotations

import redis

from .. import scripts
from ..broker import redis_errors  # noqa: F401  (re-exported: the one translation of driver errors)


def script(client: redis.Redis, name: str):
    """Register the Lua script ``tracebus/lua/<name>.lua`` on ``client``.

    Args:
        client(redis.Redis): the connection the script will run on.
        name(str): file name without ``.lua``.

    Returns:
        redis.commands.core.Script: call it with ``keys=`` and ``args=``.
    """
    return scripts.register(client, name)
