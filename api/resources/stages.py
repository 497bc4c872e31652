"""``POST /api/trace/seed-resolve`` and ``POST /api/trace/lineage``: the MSD page's first stages.

Thin: the body is read (size-capped) and handed to :class:`~tracebus.trace.msd_stages.MsdStages`;
its errors become HTTP statuses in :mod:`api.errors`. The answers follow
``TRACEBUS_API_ENVELOPE`` like the other ``/api/trace/*`` routes (the page reads both forms).
"""

from __future__ import annotations

import falcon

from api.inputs import read_json


class SeedResolve:
    """The seed-resolve stage.

    Args:
        stages: the :class:`~tracebus.trace.msd_stages.MsdStages`.
        max_body_bytes(int): the largest accepted body.
    """

    def __init__(self, stages, max_body_bytes: int):
        self.stages, self.max_body_bytes = stages, max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.stages.seed_resolve(read_json(req, self.max_body_bytes))


class Lineage:
    """The lineage stage (its answer is kept under its ``query_id`` for the events stage).

    Args:
        stages: the :class:`~tracebus.trace.msd_stages.MsdStages`.
        max_body_bytes(int): the largest accepted body.
    """

    def __init__(self, stages, max_body_bytes: int):
        self.stages, self.max_body_bytes = stages, max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.stages.lineage(read_json(req, self.max_body_bytes))
