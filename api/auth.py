"""Bearer tokens: ``TRACEBUS_API_TOKENS`` (``token:user,...``) and ``TRACEBUS_API_TOKENS_FILE``
(one ``token:user`` per line), loaded into a token -> user map.

Who a request is (token, trusted proxy header, or anonymous by address) is decided by
:class:`api.identity.Identity`.
"""

from __future__ import annotations

from pathlib import Path

from api.settings import ApiSettings
from tracebus.errors import ConfigError


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
