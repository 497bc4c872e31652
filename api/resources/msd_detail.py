"""``GET /api/mid-section-defect/analysis/detail`` and ``/export``: an MSD job's detail rows.

Both read the stored data of the events job by ``trace_query_id``
(:class:`tracebus.trace.msd.job.detailstore.DetailStore`), answer 410 ``CACHE_EXPIRED`` once it
expired, and are always in the original's envelope (``enveloped = "always"``, whatever
``TRACEBUS_API_ENVELOPE`` says: the MSD page reads ``result.data.detail``; MSD.md §7). The
export is a streamed CSV with a BOM, so the envelope leaves it alone.
"""

from __future__ import annotations

import falcon

from tracebus.errors import InvalidParams

from api import streaming
from api.inputs import text_param

#: Largest ``page`` accepted (larger ones are typos, not pages).
MAX_PAGE = 2**31 - 1


#: Longest value of a read-time filter (``loss_reasons``, ``pj_types[]``, ``packages[]``), and of
#: the parameters the page sends along and the API ignores (``start_date``... ``direction``).
MAX_FILTER_LENGTH, MAX_IGNORED_LENGTH = 128, 64
IGNORED = ("start_date", "end_date", "station", "direction")


def _list(req: falcon.Request, name: str) -> list[str] | None:
    """A list parameter sent as ``name[]=a&name[]=b``, ``name=a&name=b`` or ``name=a,b``."""
    values = (req.get_param_as_list(f"{name}[]") or []) + (req.get_param_as_list(name) or [])
    too_long = next((v for v in values if len(str(v)) > MAX_FILTER_LENGTH), None)
    if too_long is not None:
        raise InvalidParams(f"{name}: a value is longer than {MAX_FILTER_LENGTH} characters")
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


def _page(req: falcon.Request) -> int:
    page = _int(req, "page", 1)
    if not 1 <= page <= MAX_PAGE:
        raise InvalidParams(f"page must be from 1 to {MAX_PAGE}, got {page}")
    return page


def _tqid(req: falcon.Request) -> str:
    for name in IGNORED:
        text_param(req, name, MAX_IGNORED_LENGTH)
    tqid = (req.get_param("trace_query_id") or "").strip()
    if not tqid:
        raise InvalidParams("trace_query_id is required")
    return tqid


class MsdDetail:
    """One page of the detail table (paged, sorted, filtered at read time).

    Args:
        details: the MSD kind's :class:`~tracebus.trace.msd.job.detailstore.DetailStore`.
    """

    enveloped = "always"

    def __init__(self, details):
        self.details = details

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # its range: DetailStore.page checks it
        page_size = _int(req, "page_size", self.details.default_page_size)
        resp.media = self.details.page(
            _tqid(req), page=_page(req), page_size=page_size, sort_by=req.get_param("sort_by"),
            order=req.get_param("order"), loss=_list(req, "loss_reasons"), pj=_list(req, "pj_types"),
            pkg=_list(req, "packages"), user=req.context.user)


class MsdExport:
    """The CSV export, streamed (a plain browser download).

    Args:
        details: the MSD kind's :class:`~tracebus.trace.msd.job.detailstore.DetailStore`.
    """

    enveloped = "always"

    def __init__(self, details):
        self.details = details

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        tqid = _tqid(req)
        lines = self.details.export_csv(tqid, loss=_list(req, "loss_reasons"), user=req.context.user)
        resp.downloadable_as = f"defect_trace_{tqid}.csv"
        streaming.stream(resp, (line.encode("utf-8") for line in lines), "text/csv; charset=utf-8",
                         f"MSD export of {tqid}")
