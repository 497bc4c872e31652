"""quality_meta of MSD.md §2: per-domain completeness and its merge into the query's meta.

Pure functions with the original's shape: ``{status, scope, reasons}`` plus optional ``domain,
observed_rows, max_rows, failed_domains, truncated_domains, failed_ranges`` and extras such as
``has_partial_failure`` and ``failed_chunk_count``. Unknown statuses normalise to ``complete``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

COMPLETE, TRUNCATED, PARTIAL, FAILED = "complete", "truncated", "partial", "failed"
_PRIORITY = {COMPLETE: 0, TRUNCATED: 1, PARTIAL: 2, FAILED: 3}
_SCOPES = ("domain", "query", "export")
_KNOWN = {"status", "scope", "reasons", "domain", "observed_rows", "max_rows", "failed_domains",
          "truncated_domains", "failed_ranges"}


def _text(v: Any) -> str:
    return str(v or "").strip()


def _dedupe(values: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(t for t in (_text(v) for v in values) if t))


def build(*, status: str = COMPLETE, scope: str = "query", reasons: Iterable[Any] = (),
          domain: str | None = None, observed_rows: int | None = None, max_rows: int | None = None,
          failed_domains: Iterable[Any] = (), truncated_domains: Iterable[Any] = (),
          failed_ranges: Iterable[Mapping[str, Any]] = (), **extra: Any) -> dict:
    """A normalised quality meta (``build_quality_meta``); None-valued extras are left out."""
    status = _text(status).lower()
    scope = _text(scope).lower()
    meta: dict[str, Any] = {"status": status if status in _PRIORITY else COMPLETE,
                            "scope": scope if scope in _SCOPES else "query",
                            "reasons": _dedupe(reasons)}
    if _text(domain):
        meta["domain"] = _text(domain)
    for name, value in (("observed_rows", observed_rows), ("max_rows", max_rows)):
        if value is not None:
            meta[name] = int(value)
    for name, values in (("failed_domains", failed_domains), ("truncated_domains", truncated_domains)):
        if _dedupe(values):
            meta[name] = _dedupe(values)
    ranges = [{"start": _text(r.get("start")), "end": _text(r.get("end"))}
              for r in failed_ranges if isinstance(r, Mapping)]
    ranges = [r for r in ranges if r["start"] and r["end"]]
    if ranges:
        meta["failed_ranges"] = ranges
    meta.update({k: v for k, v in extra.items() if v is not None and k not in meta})
    return meta


def domain_meta(domain: str, *, observed_rows: int = 0,
                failed_chunks: Sequence[Sequence[str]] = (), error: BaseException | str | None = None) -> dict:
    """The meta of one fetched domain.

    Args:
        domain: the domain name.
        observed_rows: rows the domain produced.
        failed_chunks: the CID chunks whose fetch failed (each a list of CIDs); any makes the
            domain ``partial`` with ``chunk_failure`` and the first/last CID of each chunk.
        error: set when the whole domain failed: ``failed`` + ``domain_fetch_failed``.
    """
    if error is not None:
        return build(status=FAILED, scope="domain", reasons=["domain_fetch_failed"], domain=domain,
                     observed_rows=observed_rows, failed_domains=[domain])
    chunks = [c for c in failed_chunks if c]
    if chunks:
        return build(status=PARTIAL, scope="domain", reasons=["chunk_failure"], domain=domain,
                     observed_rows=observed_rows,
                     failed_ranges=[{"start": c[0], "end": c[-1]} for c in chunks],
                     has_partial_failure=True, failed_chunk_count=len(chunks))
    return build(status=COMPLETE, scope="domain", domain=domain, observed_rows=observed_rows)


def normalize(meta: Mapping[str, Any] | None, scope: str = "query") -> dict:
    """``normalize_quality_meta``: any mapping (or None) → a well-formed meta."""
    if not isinstance(meta, Mapping):
        return build(scope=scope)
    return build(status=_text(meta.get("status")) or COMPLETE, scope=_text(meta.get("scope")) or scope,
                 reasons=meta.get("reasons") or [], domain=meta.get("domain"),
                 observed_rows=meta.get("observed_rows"), max_rows=meta.get("max_rows"),
                 failed_domains=meta.get("failed_domains") or [],
                 truncated_domains=meta.get("truncated_domains") or [],
                 failed_ranges=meta.get("failed_ranges") or [],
                 **{k: v for k, v in meta.items() if k not in _KNOWN})


def merge(metas: Iterable[Mapping[str, Any] | None], scope: str = "query") -> dict:
    """The query meta: worst status wins, lists merged; a failed domain makes the query
    ``partial`` with reason ``domain_failure`` (the other domains' data is still served)."""
    metas = [normalize(m, scope) for m in metas if m is not None]
    status, reasons, failed, truncated, ranges = COMPLETE, [], [], [], []
    for m in metas:
        if _PRIORITY[m["status"]] > _PRIORITY[status]:
            status = m["status"]
        reasons += m["reasons"]
        if m["status"] == FAILED and m.get("domain"):
            failed.append(m["domain"])
        if m["status"] == TRUNCATED and m.get("domain"):
            truncated.append(m["domain"])
        failed += m.get("failed_domains", [])
        truncated += m.get("truncated_domains", [])
        ranges += m.get("failed_ranges", [])
    reasons = _dedupe(reasons)
    if failed and scope == "query":
        status = PARTIAL
        if "domain_failure" not in reasons:
            reasons.append("domain_failure")
    return build(status=status, scope=scope, reasons=reasons, failed_domains=failed,
                 truncated_domains=truncated, failed_ranges=ranges)
