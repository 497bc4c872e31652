"""Who may read or act on a job: its owner, or, for an anonymous job, whoever holds its id.

A caller without identity is ``anon:<client address>`` (see ``api/identity.py``). Its jobs
are listed and counted against the quota per address, but an address is not an identity
(NAT, DHCP, a proxy's pool), so any anonymous caller holding an anonymous job's id may use
it: the id carries 96 random bits (:meth:`tracebus.jobs.store.JobStore.create`) and holding
it is the credential, like a capability URL. A named user's job stays private to that user.
"""

from __future__ import annotations

#: Prefix of the users of requests without identity (``anon:203.0.113.7``).
ANONYMOUS_PREFIX = "anon:"


def is_anonymous(user: str | None) -> bool:
    return user is not None and user.startswith(ANONYMOUS_PREFIX)


def scope(user: str | None) -> str:
    """The name under which ``user``'s jobs are looked up by a computable id (an MSD
    ``trace_query_id``): the user, or ``anon:`` for every anonymous caller (who may use one
    another's jobs, see :func:`may_access`). The one place per-owner lookups are keyed."""
    return ANONYMOUS_PREFIX if user is None or is_anonymous(user) else user


def may_access(owner: str | None, caller: str | None) -> bool:
    """True when ``caller`` may use a job owned by ``owner`` (None: no check / no owner)."""
    if caller is None or owner is None or owner == caller:
        return True
    return is_anonymous(owner) and is_anonymous(caller)
