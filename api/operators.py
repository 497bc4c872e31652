"""Who is an operator: the users named in ``TRACEBUS_API_ADMINS``.

Operators may do what touches every user's messages: read, requeue and purge dead letters.
Everything else is the same for everybody (a user sees and acts on their own jobs only,
operators included; the queue, worker and Redis figures are for every caller, as
``/metrics`` is). The identity is the API's (:mod:`api.identity`): a token's user, a
trusted proxy's header, or ``anon:<address>``.
"""

from __future__ import annotations

import falcon

from tracebus.errors import ConfigError


def parse_admins(text: str) -> frozenset[str]:
    """User names separated by commas.

    Raises:
        ConfigError: an entry with characters a user name cannot have.
    """
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if not name.isprintable() or len(name) > 128:
            raise ConfigError(f"TRACEBUS_API_ADMINS: {name[:40]!r} is not a user name")
    return names


class Operators:
    """The operator check of a request.

    Args:
        admins(frozenset[str]): the operators' user names.
    """

    def __init__(self, admins: frozenset[str]):
        self.admins = admins

    def is_admin(self, user: str | None) -> bool:
        return user is not None and user in self.admins

    def require(self, req: falcon.Request) -> None:
        """Raises falcon.HTTPForbidden (403 FORBIDDEN) unless the caller is an operator."""
        if not self.is_admin(req.context.user):
            raise falcon.HTTPForbidden(description=f"{req.context.user} is not an operator "
                                                   "(TRACEBUS_API_ADMINS names them)")
