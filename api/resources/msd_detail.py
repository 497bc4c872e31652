"""``GET /api/mid-section-defect/analysis/detail`` and ``/export``: an MSD job's detail rows.

Both read the stored data of the events job by ``trace_query_id``
(:class:`tracebus.trace.msdjob.detailstore.DetailStore`), answer 410 ``CACHE_EXPIRED`` once it
expired, and are always in the original's envelope (``enveloped = "always"``, whatever
``TRACEBUS_API_ENVELOPE`` says: the MSD page reads ``result.data.detail``; MSD.md §7). The
export is a streamed CSV with a BOM, so the envelope leaves it alone.
"""

from __future__ import annotations

import falcon

from tracebus.errors import InvalidParams
from tracebus.trace.msdjob.detailstore import MAX_PAGE_SIZE, DetailStore

from api import streaming

#: Rows per page when ``page_size`` is not given (the original's default).
DEFAULT_PAGE_SIZE = 200


def _list(req: falcon.Request, name: str) -> list[str] | None:
    """A list parameter sent as ``name[]=a&name[]=b``, ``name=a&name=b`` or ``name=a,b``."""
    values = (req.get_param_as_list(f"{name}[]") or []) + (req.get_param_as_list(name) or [])
    out = [v.strip() for value in values for v in str(value).split(",") if v.strip()]
    return out or None


def _int(req: falcon.Request, name: str, default: int) -> int:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidParams(f"{name} must be an integer, got {raw!r}") from None


def _tqid(req: falcon.Request) -> str:
    tqid = (req.get_param("trace_query_id") or "").strip()
    if not tqid:
        raise InvalidParams("trace_query_id is required")
    return tqid


class MsdDetail:
    """One page of the detail table (paged, sorted, filtered at read time)."""

    enveloped = "always"

    def __init__(self, service):
        self.details = DetailStore(service.store)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        page_size = _int(req, "page_size", DEFAULT_PAGE_SIZE)
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidParams(f"page_size must be from 1 to {MAX_PAGE_SIZE}, got {page_size}")
        resp.media = self.details.page(
            _tqid(req), page=_int(req, "page", 1), page_size=page_size, sort_by=req.get_param("sort_by"),
            order=req.get_param("order"), loss=_list(req, "loss_reasons"), pj=_list(req, "pj_types"),
            pkg=_list(req, "packages"))


class MsdExport:
    """The CSV export, streamed (a plain browser download)."""

    enveloped = "always"

    def __init__(self, service):
        self.details = DetailStore(service.store)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        tqid = _tqid(req)
        lines = self.details.export_csv(tqid, loss=_list(req, "loss_reasons"))
        resp.downloadable_as = f"defect_trace_{tqid}.csv"
        streaming.stream(resp, (line.encode("utf-8") for line in lines), "text/csv; charset=utf-8",
                         f"MSD export of {tqid}")
