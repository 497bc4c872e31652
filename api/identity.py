"""Who is calling, behind a reverse proxy or not: bearer token, trusted user header, or address.

Three ways to be somebody (deploy/README.md, "Identity"):

* **bearer token** (``TRACEBUS_API_TOKENS[_FILE]``): ``Authorization: Bearer <token>`` names
  the user. When tokens are configured, a request that is neither this nor the next kind
  is 401.
* **trusted proxy header**: the user header (``TRACEBUS_USER_HEADER``, ``X-User-Id``) set by
  a reverse proxy, e.g. the dashboard's front that knows the session. It is believed only
  when the TCP peer is in ``TRACEBUS_TRUSTED_PROXIES`` (empty by default: nobody); from any
  other peer it is ignored, so a browser cannot claim to be somebody else. With
  ``TRACEBUS_PROXY_TOKEN`` set it must also come with the proxy's proof, that secret in
  ``X-Proxy-Token``; with bearer tokens configured that proof is required (an address
  alone, which any local process shares, never names a user there): without it, 401.
* **anonymous**: ``anon:<client address>``, where the address is the TCP peer, or the first
  ``X-Forwarded-For`` entry when the peer is a trusted proxy (and, with ``TRACEBUS_PROXY_TOKEN``
  set, the request carries its proof: any local process shares the proxy's address, and an
  address it could name would list a victim's anonymous jobs and rotate past every per-caller
  quota). Quotas, rate limits and job
  listings are then per address; a job id (96 random bits) is what grants access to an
  anonymous job (:func:`tracebus.trace.owners.may_access`).

The middleware sets ``req.context.user`` and ``req.context.client_addr`` before a
protected resource runs (probes and the OpenAPI document set ``auth_required = False``).
"""

from __future__ import annotations

import hmac
import ipaddress

import falcon

from api.settings import ApiSettings
from tracebus.errors import ConfigError, InvalidParams
from tracebus.trace.owners import ANONYMOUS_PREFIX

#: Longest accepted user name.
MAX_USER_LENGTH = 128
#: Header in which a trusted proxy sends ``TRACEBUS_PROXY_TOKEN`` with a user header.
PROXY_TOKEN_HEADER = "X-Proxy-Token"
#: The address of a request whose peer is unknown (a test client without one).
UNKNOWN_ADDR = "unknown"

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str, variable: str = "TRACEBUS_TRUSTED_PROXIES") -> tuple[_Network, ...]:
    """Addresses and CIDRs separated by commas (``10.0.0.0/8, ::1``).

    Raises:
        ConfigError: an entry that is neither.
    """
    networks = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ConfigError(f"{variable}: {entry!r} is not an address or a CIDR") from None
    return tuple(networks)


def _address(value: str | None):
    try:
        return ipaddress.ip_address((value or "").strip().strip("[]"))
    except ValueError:
        return None


def is_trusted(peer: str | None, networks: tuple[_Network, ...]) -> bool:
    """True when ``peer`` is an address inside one of ``networks`` (IPv4-mapped IPv6 included)."""
    addr = _address(peer)
    if addr is None:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr.version == n.version and addr in n for n in networks)


def client_address(peer: str | None, forwarded_for: str | None, trusted: bool) -> str:
    """The caller's address: the first ``X-Forwarded-For`` entry when the peer is a trusted
    proxy and the entry is an address, else the peer itself."""
    if trusted and forwarded_for:
        first = _address(forwarded_for.split(",")[0])
        if first is not None:
            return str(first)
    addr = _address(peer)
    return str(addr) if addr is not None else UNKNOWN_ADDR


def check_user(value: str, header: str) -> str:
    """A user name from ``header``, checked.

    Raises:
        InvalidParams: longer than :data:`MAX_USER_LENGTH`, not printable, or in the
            anonymous namespace (``anon:``).
    """
    if len(value) > MAX_USER_LENGTH or not value.isprintable():
        raise InvalidParams(f"header {header} must be at most {MAX_USER_LENGTH} printable characters")
    if value.startswith(ANONYMOUS_PREFIX):
        raise InvalidParams(f"header {header}: user names starting with {ANONYMOUS_PREFIX!r} are reserved")
    return value


class Identity:
    """Falcon middleware setting ``req.context.user`` and ``req.context.client_addr``.

    Args:
        settings(ApiSettings): ``user_header`` and ``trusted_proxies``.
        tokens(dict[str, str]): token -> user; empty disables bearer authentication.

    Raises:
        ConfigError: a malformed ``TRACEBUS_TRUSTED_PROXIES``.
    """

    def __init__(self, settings: ApiSettings, tokens: dict[str, str]):
        self.header = settings.user_header
        self.networks = parse_networks(settings.trusted_proxies)
        self.tokens = dict(tokens)
        self.proxy_token = settings.proxy_token.encode()

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource, params) -> None:
        if resource is None or not getattr(resource, "auth_required", True):
            return
        trusted = is_trusted(req.remote_addr, self.networks)
        forwarded = trusted and (not self.proxy_token or self._has_proof(req))
        req.context.client_addr = client_address(req.remote_addr, req.get_header("X-Forwarded-For"), forwarded)
        req.context.user = self.user_of(req, trusted)

    def user_of(self, req: falcon.Request, trusted: bool) -> str:
        """The caller (see the module docstring for the order).

        Raises:
            falcon.HTTPUnauthorized: tokens are configured and the request has neither a
                known token nor a trusted user header.
            InvalidParams: a malformed user header from a trusted proxy.
        """
        if self.tokens and req.auth:
            return self._from_token(req)
        named = (req.get_header(self.header) or "").strip() if trusted else ""
        if named:
            self._check_proxy_proof(req)
            return check_user(named, self.header)
        if self.tokens:
            raise falcon.HTTPUnauthorized(description="an 'Authorization: Bearer <token>' header "
                                                      "is required", challenges=["Bearer"])
        return ANONYMOUS_PREFIX + req.context.client_addr

    def _check_proxy_proof(self, req: falcon.Request) -> None:
        """A user header needs the proxy's ``X-Proxy-Token`` when one is configured, and one
        must be configured in token mode.

        Raises:
            falcon.HTTPUnauthorized: the proof is required and missing or wrong.
        """
        if not self.proxy_token and not self.tokens:
            return
        if not self.proxy_token:
            raise falcon.HTTPUnauthorized(
                description=f"with bearer tokens configured, a {self.header} header is believed only "
                            f"with the proxy's X-Proxy-Token (TRACEBUS_PROXY_TOKEN is not set)",
                challenges=["Bearer"])
        if not self._has_proof(req):
            raise falcon.HTTPUnauthorized(
                description=f"a {self.header} header needs the proxy's {PROXY_TOKEN_HEADER}",
                challenges=["Bearer"])

    def _has_proof(self, req: falcon.Request) -> bool:
        proof = (req.get_header(PROXY_TOKEN_HEADER) or "").strip().encode()
        return hmac.compare_digest(proof, self.proxy_token)

    def _from_token(self, req: falcon.Request) -> str:
        scheme, _, token = (req.auth or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise falcon.HTTPUnauthorized(description="an 'Authorization: Bearer <token>' header "
                                                      "is required", challenges=["Bearer"])
        token_bytes = token.strip().encode()
        # Compare against every token, each in constant time.
        user = None
        for known, name in self.tokens.items():
            if hmac.compare_digest(known.encode(), token_bytes):
                user = name
        if user is None:
            raise falcon.HTTPUnauthorized(description="unknown bearer token",
                                          challenges=['Bearer error="invalid_token"'])
        return user
