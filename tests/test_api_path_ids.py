"""Path parameters and ids are checked before they reach a Redis key (issue 12, item 4).

A job id is ``<kind>-<24 hex>``; anything else in a ``{job_id}`` of any route is 404 with
the JSON error body, and in particular the names of the job's other keys (``<id>:units``,
``<id>:progress``, its chunks...) never make the API read a key of another type (that was
a 500 with a traceback, or a 503 "Redis is unavailable" from WRONGTYPE). A trace_query_id
that is not ``msd-`` + 16 hex is 404 ``QUERY_NOT_FOUND`` on the MSD detail and export.
"""

from __future__ import annotations

from urllib.parse import quote

import falcon
import pytest

from api.pathparams import check_file_name, check_routes
from tracebus.jobs.ids import check_job_id, is_job_id, new_job_id
from tracebus.jobs.errors import JobNotFound
from tracebus.jobs.keys import JobKeys

from tests.api_support import (api_broker, api_settings, client, idle_client, submit,  # noqa: F401
                               trace_cids, trace_workers, user, wait_job)

#: Every route with a {job_id}, as (method, path template).
JOB_ROUTES = [
    ("GET", "/api/trace/job/{}"), ("GET", "/api/trace/job/{}/result"),
    ("GET", "/api/trace/job/{}/result?domain=history&limit=5"), ("GET", "/api/trace/job/{}/stream"),
    ("GET", "/api/trace/job/{}/events"), ("GET", "/api/v1/jobs/{}"), ("POST", "/api/v1/jobs/{}/cancel"),
    ("POST", "/api/v1/jobs/{}/retry"), ("GET", "/api/trace/seed/job/{}"), ("GET", "/api/trace/seed/job/{}/result"),
    ("GET", "/api/trace/lineage/job/{}"), ("GET", "/api/trace/lineage/job/{}/result"),
]
#: Values that are not job ids, with the job's own id substituted for {}.
NOT_IDS = ["{}:units", "{}:progress", "{}:todo", "{}:inputs", "{}:partials", "{}:manifest:history",
           "{}:chunk:history:0:0", "{}:artifact:x", "{}X", "{}\n", " {}", "trace-evt-",
           "*", "x" * 5000, "trace-evt-" + "0" * 23, "tracé-" + "0" * 24, "../../job/{}"]


def _get(client_, method: str, template: str, job_id: str):
    path, _, query = template.format(quote(job_id, safe="")).partition("?")
    return client_.simulate_request(method, path, query_string=query or None)


def _assert_404(resp, code: str = "JOB_NOT_FOUND", context: str = "") -> None:
    assert resp.status_code == 404, (context[:80], resp.text[:300])
    assert resp.headers["content-type"].startswith("application/json")
    # a value with a "/" matches no route at all (NOT_FOUND) before it could be a job id
    expected = {code, "NOT_FOUND"} if "/" in context else {code}
    assert resp.json["error"]["code"] in expected and resp.json["error"]["message"], context[:80]


def test_job_ids_have_one_shape():
    made = new_job_id("trace-evt")

    assert is_job_id(made) and made.startswith("trace-evt-") and check_job_id(made) == made
    for bad in (made + ":units", made.upper(), made[:-1], "", None, 42, "-" + "0" * 24):
        assert not is_job_id(bad)
    with pytest.raises(JobNotFound):
        check_job_id(made + ":progress")
    with pytest.raises(ValueError, match="job kind"):
        new_job_id("Trace:evt")


@pytest.mark.parametrize("method, template", JOB_ROUTES)
def test_anything_but_a_job_id_is_404_on_every_job_route(idle_client, api_broker, trace_cids, method, template):
    # Given a queued job: its hash, units, todo list, inputs and progress stream all exist
    job = submit(idle_client, trace_cids[:300])
    assert api_broker.client.type(f"{JobKeys(api_broker.keys.prefix).job(job)}:progress") == b"stream"

    for not_an_id in [n.replace("{}", job) for n in NOT_IDS] + [job.upper()]:
        # When a route is called with something that is not a job id
        resp = _get(idle_client, method, template, not_an_id)
        # Then it is 404 with the JSON error body, never a 500 or a 503
        _assert_404(resp, context=not_an_id)
    # And the job itself is untouched (nothing was cancelled or retried)
    assert idle_client.simulate_get(f"/api/trace/job/{job}").json["status"] == "queued"


def test_no_key_of_a_finished_job_can_be_read_as_a_job(client, api_broker, trace_cids):
    # Given a completed job: chunks, manifests, partials and progress exist under its id
    job = submit(client, trace_cids[:300], ("history", "holds"))
    wait_job(client, job)
    # (keys are P:job:{<id>}:units ... and the chunks P:job:{<id>:<section>:<unit>:<attempt>}:<part>,
    # docs/keys.md: each name is sent as it is after "P:job:" and without its hash-tag braces)
    keys = JobKeys(api_broker.keys.prefix)
    base = keys.job(job)[:-len(job) - 2]
    names = {k.decode()[len(base):] for k in api_broker.client.scan_iter(match=keys.job_scan(job))} - {f"{{{job}}}"}
    others = sorted(names | {n.replace("{", "").replace("}", "") for n in names})
    assert any(n.startswith(f"{{{job}:history:") for n in names), names  # a chunk
    assert f"{job}:progress" in others and f"{job}:history:0:1:0" in others, others

    # When each of its keys' names is sent as a job id to every job route
    for key_id in others:
        for method, template in JOB_ROUTES:
            # Then each is 404: no route reads a key of another type
            _assert_404(_get(client, method, template, key_id), context=key_id)


@pytest.mark.parametrize("path", ["/api/mid-section-defect/analysis/detail", "/api/mid-section-defect/export"])
def test_a_trace_query_id_of_another_shape_is_404_on_the_msd_detail_and_export(idle_client, path):
    for tqid in ("msd-0000000000000000:x", "msd-000000000000000", "*", "x" * 3000, "msd-000000000000000G"):
        resp = idle_client.simulate_get(path, params={"trace_query_id": tqid})
        _assert_404(resp, "QUERY_NOT_FOUND")
        assert resp.json["success"] is False  # the MSD routes are always in the original's envelope
    expired = idle_client.simulate_get(path, params={"trace_query_id": "msd-0000000000000000"})
    assert expired.status_code == 410 and expired.json["error"]["code"] == "CACHE_EXPIRED"


def test_an_app_with_an_unchecked_path_parameter_is_refused_at_build():
    class Thing:
        def on_get(self, req, resp, thing_id):
            pass

    app = falcon.App()
    app.add_route("/things/{thing_id}", Thing())

    with pytest.raises(RuntimeError, match="thing_id"):
        check_routes(app)


def test_a_file_name_parameter_is_a_plain_name():
    assert check_file_name("monitor.js") == "monitor.js" and check_file_name("") == ""
    for bad in ("../keys.py", ".hidden", "a/b", "x" * 65, "mon\nitor.js"):
        with pytest.raises(falcon.HTTPNotFound):
            check_file_name(bad)


def test_a_lineage_query_id_of_another_shape_is_never_read(redis_client):
    import msgpack

    from tracebus.trace.lineage_cache import LineageCache, lineage_query_id
    from tracebus.trace.keys import TraceKeys

    cache, keys = LineageCache(redis_client, "lqtest", 60), TraceKeys("lqtest")
    good = lineage_query_id("backward", ["A", "B"])
    cache.put(good, {"ancestors": {}})
    redis_client.set(keys.lineage("evil"), msgpack.packb({"ancestors": {"x": []}}))

    assert cache.get(good) == {"ancestors": {}}
    assert cache.get("evil") is None and cache.get(good + ":x") is None and cache.get(None) is None
