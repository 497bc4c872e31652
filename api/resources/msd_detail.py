"""``GET /api/mid-section-defect/analysis/detail`` and ``/export``: an MSD job's detail rows.

Both read the stored data of the events job by ``trace_query_id``
(:class:`tracebus.trace.msd.job.detailstore.DetailStore`), answer 410 ``CACHE_EXPIRED`` once it
expired, and are always in the original's envelope (``enveloped = "always"``, whatever
``TRACEBUS_API_ENVELOPE`` says: the MSD page reads ``result.data.detail``; MSD.md §7). The
export is a streamed CSV with a BOM, so the envelope leaves it alone. Their query strings are
declared in :mod:`tracebus.trace.msd.job.detailquery` (read from the store's ``detail_query`` and
``export_query``, and documented from there).
"""

from __future__ import annotations

import falcon

from api import streaming
from api.inputs import query


class MsdDetail:
    """One page of the detail table (paged, sorted, filtered at read time).

    Args:
        details: the MSD kind's :class:`~tracebus.trace.msd.job.detailstore.DetailStore`.
    """

    enveloped = "always"

    def __init__(self, details):
        self.details = details

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = query(req, self.details.detail_query)
        resp.media = self.details.page(
            q["trace_query_id"], page=q["page"], page_size=q["page_size"], sort_by=q["sort_by"], order=q["order"],
            loss=q["loss_reasons"], pj=q["pj_types"], pkg=q["packages"], user=req.context.user)


class MsdExport:
    """The CSV export, streamed (a plain browser download).

    Args:
        details: the MSD kind's :class:`~tracebus.trace.msd.job.detailstore.DetailStore`.
    """

    enveloped = "always"

    def __init__(self, details):
        self.details = details

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q = query(req, self.details.export_query)
        tqid = q["trace_query_id"]
        lines = self.details.export_csv(tqid, loss=q["loss_reasons"], user=req.context.user)
        resp.downloadable_as = f"defect_trace_{tqid}.csv"
        streaming.stream(resp, (line.encode("utf-8") for line in lines), "text/csv; charset=utf-8",
                         f"MSD export of {tqid}")
