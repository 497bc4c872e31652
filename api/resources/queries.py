"""The route a declared query kind declares for itself (``QueryKind.http``; e.g. ``POST
/api/query-tool/equipment-period``): one resource serves every such kind.

As the original's routes (routes/query_tool_routes.py), always in its envelope: a span under the
kind's ``async_days`` is answered now (``{success, data: {data, total, date_range, ...}}``), a
longer or costlier one is a job (202 ``{success, data: {async, job_id, status_url, result_url}}``)
that the page polls through ``/api/job/<id>?prefix=<kind>``.
:class:`~tracebus.trace.query.jobs.QueryJobs` checks, decides and runs it.
"""

from __future__ import annotations

import falcon

from api.inputs import read_json, wants_fresh
from api.resources import accepted


class QueryRequest:
    """The requests of one declared query kind.

    Args:
        kind(str): the kind's name.
        jobs: the :class:`~tracebus.trace.query.jobs.QueryJobs`.
        max_body_bytes(int): the largest accepted body.
        offloop: the :class:`~api.offloop.OffLoop` that encodes an answer made now.
    """

    enveloped = "always"

    def __init__(self, kind: str, jobs, max_body_bytes: int, offloop):
        self.kind, self.jobs, self.max_body_bytes, self.offloop = kind, jobs, max_body_bytes, offloop

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        is_job, answer = self.jobs.request(self.kind, read_json(req, self.max_body_bytes),
                                           req.context.user, fresh=wants_fresh(req))
        if is_job:
            accepted(resp, answer)
            return
        self.offloop.answer(resp, answer)
