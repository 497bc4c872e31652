"""``quality_meta`` of a trace result, from the job's failed domains (MSD.md section 2's shape).

A stand-in until the MSD quality_meta module lands: ``{status, scope, reasons}`` plus
``domain``/``observed_rows`` per domain and ``failed_domains`` per query, computed only from
which domains failed. Replace :func:`domain_meta` and :func:`query_meta` with the real
ones (chunk failures, truncation) when they exist; callers only use these two.
"""

from __future__ import annotations

from typing import Sequence


def domain_meta(domain: str, observed_rows: int | None, failed: bool) -> dict:
    """One domain's meta: ``complete`` with its row count, or ``failed``."""
    if failed:
        return {"status": "failed", "scope": "domain", "reasons": ["domain_fetch_failed"], "domain": domain}
    return {"status": "complete", "scope": "domain", "reasons": [], "domain": domain,
            "observed_rows": observed_rows}


def query_meta(domains: Sequence[str], failed_domains: Sequence[str]) -> dict:
    """The query's meta: ``complete``; ``partial`` (reason ``domain_failure``) when some
    domains failed; ``failed`` when all did."""
    failed = [d for d in domains if d in set(failed_domains)]
    if not failed:
        return {"status": "complete", "scope": "query", "reasons": []}
    status = "failed" if len(failed) == len(domains) else "partial"
    return {"status": status, "scope": "query", "reasons": ["domain_failure"], "failed_domains": failed}
