"""The MSD page's lookups: ``GET /api/mid-section-defect/{station-options,loss-reasons,container-filter-options}``.

Their answers are always the original's envelope ``{success, data, meta}`` (``enveloped =
"always"``), whatever ``TRACEBUS_API_ENVELOPE`` says: the page reads ``result.data``
(MSD.md section 7). The work is in :class:`~tracebus.trace.msd.lookups.MsdLookups`.
"""

from __future__ import annotations

import falcon

from api.inputs import query


class _Lookup:
    enveloped = "always"

    def __init__(self, lookups):
        self.lookups = lookups


class StationOptions(_Lookup):
    """``data: [{name, label, order}]``, the workcenter groups in order."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.lookups.station_options()


class LossReasons(_Lookup):
    """``data: {loss_reasons: [str]}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.lookups.loss_reasons()


class ContainerFilterOptions(_Lookup):
    """``data: {pj_types, packages, bops, pj_functions}``, ``meta: {updated_at, schema_version}``;
    ``selected`` is URL-encoded JSON (400 when malformed)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        data, meta = self.lookups.container_filter_options(query(req, self.lookups.selected_query)["selected"])
        resp.media = data
        resp.context.envelope_meta = meta
