"""The sample kind's HTTP side: an echo answered now (or a job above 10), its job's status, a lookup."""

from __future__ import annotations

from tracebus.errors import InvalidParams
from tracebus.jobs.spec import JobSpec
from tracebus.trace.kinds import Doc, Env, Reply, Route, ref
from tracebus.trace.now_or_job import NowOrJob

#: The kind of its jobs (their id prefix) and its unit actor.
JOB_KIND, ACTOR_NAME = "sample-echo", "sample_echo_unit"


class Echo(NowOrJob):
    """``{"n": int}``: ``{"echo": n}`` now, a job above 10."""

    what = "echo"

    def __init__(self, env: Env):
        self.env = env

    def check(self, body, user: str) -> int:
        n = body.get("n") if isinstance(body, dict) else None
        if not isinstance(n, int) or isinstance(n, bool):
            raise InvalidParams("n must be an integer")
        return n

    def is_async(self, request: int) -> bool:
        return request > 10

    def now(self, request: int, user: str) -> dict:
        return self.env.run(lambda: {"echo": request})

    def submit(self, request: int, user: str, fresh: bool) -> dict:
        spec = JobSpec(kind=JOB_KIND, user=user, sections=("echo",), items=[request], chunk_items=1,
                       queue=self.env.settings.queue, actor_name=ACTOR_NAME, fingerprint="", fresh=fresh)
        job_id = self.env.store.create(spec)
        self.env.dispatcher.start(job_id)
        return {"job_id": job_id, "status_url": f"/api/sample/echo/job/{job_id}"}


def _status(env: Env):
    return lambda job_id, user: {"job_id": job_id, "status": env.store.status(job_id)["status"]}


def _lookup(env: Env):
    return lambda values, user: Reply({"values": values("v")}, {"count": len(values("v"))})


def routes() -> tuple[Route, ...]:
    return (
        Route("/api/sample/echo", "now-or-job", Echo,
              lambda settings: Doc("Echo a number (a job above 10)", {"200": (ref("SampleEcho"), "the echo"),
                                                                       "202": ({"type": "object"}, "a job")},
                                   ("400", "429"), body={"type": "object", "properties": {"n": {"type": "integer"}}}),
              "sample", "sample-echo", (1, 60), "always"),
        Route("/api/sample/echo/job/{job_id}", "job-status", _status,
              lambda settings: Doc("An echo job's status", {"200": ({"type": "object"}, "the status")}, ("404",),
                                   job_id="`sample-echo-<24 hex>`"),
              "sample", "sample-echo"),
        Route("/api/sample/values", "lookup", _lookup,
              lambda settings: Doc("The values of v", {"200": ({"type": "object"}, "the values")},
                                   params=({"name": "v", "in": "query", "required": False,
                                            "schema": {"type": "string"}, "description": "repeatable"},)),
              "sample", enveloped="always"),
    )


def schemas(settings) -> dict[str, dict]:
    return {"SampleEcho": {"type": "object", "required": ["echo"], "properties": {"echo": {"type": "integer"}}}}
