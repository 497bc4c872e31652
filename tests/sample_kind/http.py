"""The sample kind's HTTP side: an echo answered now (or a job above 10), its job's status, a lookup."""

from __future__ import annotations

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Custom
from tracebus.jobs.list_fields import Words
from tracebus.jobs.shapes import Query, Shape
from tracebus.jobs.spec import JobSpec
from tracebus.trace.now_or_job import NowOrJob
from tracebus.trace.routes import Doc, Env, Reply, Route, ref

#: The kind of its jobs (their id prefix) and its unit actor.
JOB_KIND, ACTOR_NAME = "sample-echo", "sample_echo_unit"


def _integer(n) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise InvalidParams("n must be an integer")
    return n


#: The echo's body, declared (its check and its OpenAPI schema).
ECHO_REQUEST = Shape((Custom("n", missing="n must be an integer", check_value=_integer, json={"type": "integer"}),))
#: The lookup's query string: ``v``, repeatable (its reading and its OpenAPI parameters).
VALUES_QUERY = Query((Words("v", description="repeatable"),))


class Echo(NowOrJob):
    """``{"n": int}``: ``{"echo": n}`` now, a job above 10."""

    what = "echo"

    def __init__(self, env: Env):
        self.env = env

    def check(self, body, user: str) -> int:
        return ECHO_REQUEST.check(body)["n"]

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
    def lookup(values, user):
        got = VALUES_QUERY.read(values)["v"] or []
        return Reply({"values": got}, {"count": len(got)})

    return lookup


def routes() -> tuple[Route, ...]:
    return (
        Route("/api/sample/echo", "now-or-job", Echo,
              lambda settings: Doc("Echo a number (a job above 10)", {"200": (ref("SampleEcho"), "the echo"),
                                                                       "202": ({"type": "object"}, "a job")},
                                   ("400", "429"), body=ECHO_REQUEST.schema()),
              "sample", "sample-echo", (1, 60), "always"),
        Route("/api/sample/echo/job/{job_id}", "job-status", _status,
              lambda settings: Doc("An echo job's status", {"200": ({"type": "object"}, "the status")}, ("404",),
                                   job_id="`sample-echo-<24 hex>`"),
              "sample", "sample-echo"),
        Route("/api/sample/values", "lookup", _lookup,
              lambda settings: Doc("The values of v", {"200": ({"type": "object"}, "the values")},
                                   params=tuple(VALUES_QUERY.parameters())),
              "sample", enveloped="always"),
    )


def schemas(settings) -> dict[str, dict]:
    return {"SampleEcho": {"type": "object", "required": ["echo"], "properties": {"echo": {"type": "integer"}}}}
