"""The Host allow-list (``TRACEBUS_API_ALLOWED_HOSTS``): a request naming another host is 400.

A page on a name the attacker controls can make a browser send requests to an API on the
visitor's loopback (DNS rebinding): those carry the attacker's name in ``Host``. Comparing
the name (without the port, case-insensitively) against the names the API is served under
refuses them before anything else runs.
"""

from __future__ import annotations

import falcon

from tracebus.errors import InvalidParams

#: Names of the loopback interface (what ``tracebus up`` allows when it binds one).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class InvalidHost(InvalidParams):
    code = "INVALID_HOST"


def parse_hosts(text: str) -> frozenset[str] | None:
    """The allowed names, lower-cased; None (any) for empty or ``*``."""
    names = frozenset(n.strip().lower().strip("[]") for n in text.split(",") if n.strip())
    return None if not names or "*" in names else names


def host_name(header: str) -> str:
    """``Host`` without its port, lower-cased (``[::1]:8000`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def default_hosts(bind_host: str) -> str:
    """What ``tracebus up`` allows when ``TRACEBUS_API_ALLOWED_HOSTS`` is unset: the loopback
    names for a loopback address, any host for a wildcard one, else that address and loopback."""
    host = bind_host.strip("[]").lower()
    if host in ("", "0.0.0.0", "::"):
        return "*"
    return ",".join(dict.fromkeys((host, *LOOPBACK_NAMES)))


class AllowedHosts:
    """Falcon middleware refusing a ``Host`` outside the allow-list (first, before identity)."""

    def __init__(self, text: str):
        self.names = parse_hosts(text)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.names is None:
            return
        name = host_name(req.get_header("Host") or "")
        if name not in self.names:
            raise InvalidHost(f"this API does not answer for host {name[:100]!r} "
                              f"(TRACEBUS_API_ALLOWED_HOSTS)")
