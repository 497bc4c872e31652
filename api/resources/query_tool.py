"""``POST /api/query-tool/equipment-period``: the query-tool page's equipment-period query.

As the original's route (routes/query_tool_routes.py), always in its envelope: a span under 30
days is answered now (``{success, data: {data, total, date_range}}``), a longer one is a job
(202 ``{success, data: {async, job_id, status_url, result_url}}``) that the page polls through
``/api/job/<id>?prefix=query-tool``. The kind is declared in
:mod:`tracebus.trace.query.equipment`; :class:`~tracebus.trace.query.jobs.QueryJobs` runs it.
"""

from __future__ import annotations

import falcon

from api.inputs import read_json, wants_fresh
from api.resources import accepted
from tracebus.trace.query.equipment import EQUIPMENT_PERIOD


class EquipmentPeriod:
    """The equipment-period request.

    Args:
        jobs: the :class:`~tracebus.trace.query.jobs.QueryJobs`.
        max_body_bytes(int): the largest accepted body.
        offloop: the :class:`~api.offloop.OffLoop` that encodes an answer made now.
    """

    enveloped = "always"

    def __init__(self, jobs, max_body_bytes: int, offloop):
        self.jobs, self.max_body_bytes, self.offloop = jobs, max_body_bytes, offloop

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        is_job, answer = self.jobs.request(EQUIPMENT_PERIOD.kind, read_json(req, self.max_body_bytes),
                                           req.context.user, fresh=wants_fresh(req))
        if is_job:
            accepted(resp, answer)
            return
        self.offloop.answer(resp, answer)
