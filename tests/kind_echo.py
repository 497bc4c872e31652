"""A job kind that lives in the tests only: a folder's worth of code and a registration.

Importing this module registers it (:func:`tracebus.trace.kinds.register`), in the test process
and in a worker started with ``tracebus worker tracebus.trace.tasks tests.kind_echo``: the
service, the writers and the generic job contract then serve it without a line of theirs
changed (tests/test_kinds.py). A request of profile :data:`PROFILE` is always a job; its one
section ``echo`` gets, per container id, a row ``(CID, LENGTH, UNIT)``; its status says which
kind rendered it (``rendered_by``) and its export types ``LENGTH`` as an integer.
"""

from __future__ import annotations

from tracebus.errors import InvalidParams
from tracebus.jobs.spec import JobSpec
from tracebus.trace import kinds
from tracebus.trace.jobkind import JobKind
from tracebus.trace.request import Request

PROFILE = "test_echo"
SECTION = "echo"
COLUMNS = ("CID", "LENGTH", "UNIT")


class EchoKind(JobKind):
    name = "test-echo"
    actor_name = "test_echo_unit"
    profiles = (PROFILE,)

    def parse(self, body, user, settings):
        cids = body.get("container_ids")
        if not isinstance(cids, list) or not cids or not all(isinstance(c, str) and c for c in cids):
            raise InvalidParams("container_ids must be a non-empty list of strings")
        return Request(PROFILE, list(dict.fromkeys(cids)), [SECTION], {}, user, kind=self.name)

    def is_async(self, req, settings):
        return True

    def submit(self, req, env):
        spec = JobSpec(kind="test-echo", user=req.user, sections=(SECTION,), items=req.container_ids,
                       chunk_items=2, queue=env.settings.queue, actor_name=self.actor_name,
                       app={"profile": PROFILE, "params": {}})
        job_id = env.store.create(spec)
        env.dispatcher.start(job_id)
        return job_id

    def run_unit(self, unit):
        assert unit.plan.chunk_items == 2 and unit.app["profile"] == PROFILE  # what the runner holds
        unit.write(list(COLUMNS), [[cid, len(cid), unit.unit] for cid in unit.input])

    def render_status(self, raw):
        return {**super().render_status(raw), "rendered_by": self.name}

    def column_types(self, app, section):
        return {"CID": "string", "LENGTH": "int64", "UNIT": "int64"}, COLUMNS


ECHO = kinds.register(EchoKind())
