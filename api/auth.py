"""Who is calling: the user header, or a bearer token when tokens are configured.

Without tokens the user is the value of ``settings.user_header`` (``X-User-Id``), or
``anonymous`` when the header is absent. With tokens (``TRACEBUS_API_TOKENS`` as
``token:user,...`` and/or ``TRACEBUS_API_TOKENS_FILE`` with one ``token:user`` per line),
every request to a protected resource needs ``Authorization: Bearer <token>`` and the
token decides the user; the header is ignored. Probes and the OpenAPI document are open
(their resources set ``auth_required = False``).
"""

from __future__ import annotations

import hmac
from pathlib import Path

import falcon

from api.settings import ApiSettings
from tracebus.errors import ConfigError, InvalidParams

#: The user of requests that do not name one.
ANONYMOUS = "anonymous"
#: Longest accepted user name.
MAX_USER_LENGTH = 128


def parse_tokens(text: str, separator: str, origin: str) -> dict[str, str]:
    """Parse ``token:user`` entries separated by ``separator`` (blank entries and ``#`` comments skipped).

    Raises:
        ConfigError: an entry has no ``:``, or an empty token or user.
    """
    tokens: dict[str, str] = {}
    for number, entry in enumerate(text.split(separator), 1):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        token, sep, user = entry.partition(":")
        if not sep or not token.strip() or not user.strip():
            raise ConfigError(f"{origin}: entry {number} is not 'token:user'")
        tokens[token.strip()] = user.strip()
    return tokens


def load_tokens(settings: ApiSettings) -> dict[str, str]:
    """token -> user from ``settings.api_tokens`` and the file ``settings.api_tokens_file``.

    Raises:
        ConfigError: a malformed entry, or a tokens file that cannot be read.
    """
    tokens = parse_tokens(settings.api_tokens, ",", "TRACEBUS_API_TOKENS")
    if settings.api_tokens_file:
        try:
            text = Path(settings.api_tokens_file).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"TRACEBUS_API_TOKENS_FILE: cannot read {settings.api_tokens_file}: "
                              f"{e.strerror}") from None
        tokens.update(parse_tokens(text, "\n", settings.api_tokens_file))
    return tokens


class UserMiddleware:
    """Sets ``req.context.user`` before a protected resource runs.

    Args:
        header(str): the header naming the user when no tokens are configured.
        tokens(dict[str, str]): token -> user; empty disables bearer authentication.
    """

    def __init__(self, header: str, tokens: dict[str, str]):
        self.header = header
        self.tokens = dict(tokens)

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource, params) -> None:
        if resource is None or not getattr(resource, "auth_required", True):
            return
        req.context.user = self._from_token(req) if self.tokens else self._from_header(req)

    def _from_header(self, req: falcon.Request) -> str:
        value = (req.get_header(self.header) or "").strip()
        if not value:
            return ANONYMOUS
        if len(value) > MAX_USER_LENGTH or not value.isprintable():
            raise InvalidParams(f"header {self.header} must be at most {MAX_USER_LENGTH} "
                                "printable characters")
        return value

    def _from_token(self, req: falcon.Request) -> str:
        scheme, _, token = (req.auth or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise falcon.HTTPUnauthorized(description="an 'Authorization: Bearer <token>' header "
                                                      "is required", challenges=["Bearer"])
        token = token.strip().encode()
        # Compare against every token in constant time per token.
        user = None
        for known, name in self.tokens.items():
            if hmac.compare_digest(known.encode(), token):
                user = name
        if user is None:
            raise falcon.HTTPUnauthorized(description="unknown bearer token",
                                          challenges=['Bearer error="invalid_token"'])
        return user
