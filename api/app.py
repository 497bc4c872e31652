"""The Falcon app: :func:`create_app` wires resources to their dependencies; :func:`get_app`
is the gunicorn entry point (``gunicorn -c api/gunicorn.conf.py 'api.app:get_app()'``).

``create_app`` reads no environment: it takes the settings, the broker and (optionally) the
trace service, so tests build it over the real test Redis. ``get_app`` builds those from the
environment in each gunicorn worker, after the fork, so no Redis socket is shared.
"""

from __future__ import annotations

from dataclasses import replace

import falcon
import orjson

from tracebus import logs
from tracebus.engine.actor import set_broker
from tracebus.engine.broker import Broker
from api.settings import ApiSettings
from tracebus.engine.registry import WorkerRegistry
from tracebus.trace.generic_jobs import GenericJobs
from tracebus.trace import installed
from tracebus.trace.service import EventsRequests, TraceService
from tracebus.trace.sources.control import session_places

from api import metrics, openapi
from api.auth import load_tokens
from api.envelope import Envelope
from api.errors import ErrorHandlers
from api.headers import SafeHeaders
from api.hosts import AllowedHosts
from api.identity import Identity
from api.inputs import BodyDeadline
from api.offloop import OffLoop
from api.streamslots import StreamSlots
from api.keys import ApiKeys
from api.pathparams import PathParams, check_routes
from api.ratelimit import RateLimiter, RateLimits, parse_limits, quick_client
from api.resources.generic import GenericJob
from api.resources.jobs import TraceJob
from api.resources.meta import Health, OpenApi, Ready, SourceCheck
from api.resources.routes import NowOrJobRequest, resource
from api.resources.v1 import Jobs
from api.operators import Operators, parse_admins
from api.resources import ui
from api.resources.dead_letters import DeadLetters
from api.resources.monitor import Me, Queues, RedisHealth, States, Workers


def create_app(settings: ApiSettings, broker: Broker, service: TraceService | None = None,
               tokens: dict[str, str] | None = None) -> falcon.App:
    """Build the API.

    Args:
        settings(ApiSettings): limits, identity (user header, trusted proxies), rate limits,
            envelope, SSE timings, queue.
        broker(Broker): the queue and the Redis client that holds job state and results.
        service(TraceService | None): the trace operations; built from settings and broker
            when None.
        tokens(dict[str, str] | None): bearer token -> user; loaded from the settings
            (``TRACEBUS_API_TOKENS``, ``TRACEBUS_API_TOKENS_FILE``) when None.

    Raises:
        ConfigError: a malformed tokens, trusted-proxies or rate-limits setting, or an
            unreadable tokens file.
    """
    service = service if service is not None else TraceService(settings, broker)
    tokens = load_tokens(settings) if tokens is None else tokens
    http_metrics, metrics_resource = metrics.build(settings, broker)
    # The metrics middleware times the whole request, identity and rate limits included; the
    # rate limits count per caller, so they come after the identity. The envelope goes first
    # so that its process_response runs last, over whatever the others produced.
    quick = quick_client(settings.redis_url)  # fails in 0.5 s on a frozen Redis: never adds to a 503
    limiter = RateLimiter(quick, ApiKeys(settings.key_prefix), parse_limits(settings.rate_limits))
    errors = ErrorHandlers(settings.api_retry_after_s, probe=quick.ping)
    middleware = [SafeHeaders(), Envelope(everywhere=bool(settings.api_envelope),
                                            dashboard=bool(settings.api_dashboard_envelope)), errors, http_metrics,
                  AllowedHosts(settings.api_allowed_hosts), Identity(settings, tokens), RateLimits(limiter),
                  PathParams(), BodyDeadline(settings.api_body_timeout_s), StreamSlots(settings.api_max_streams, settings.api_max_streams_per_caller,
                                            settings.api_retry_after_s, settings.api_write_timeout_s)]
    app = falcon.App(middleware=middleware)
    # Responses are encoded with orjson: a 5,000-row page took 47 ms with the stdlib, 4.6 ms this way.
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = falcon.media.JSONHandler(dumps=orjson.dumps)
    errors.install(app)

    offloop = OffLoop(settings.api_sync_threads)  # database work of an answer made in the request
    env = replace(service.env(run=offloop.call), settings=settings)  # what the kinds' route handlers use
    body_cap = settings.api_max_body_bytes
    trace_job = TraceJob(service, settings)
    jobs = Jobs(service, lambda name: installed.requests(name, env), body_cap)
    app.add_route("/api/trace/events", NowOrJobRequest(EventsRequests(service), body_cap, offloop))
    app.add_route("/api/trace/job/{job_id}", trace_job)
    for suffix in ("result", "stream", "events"):
        app.add_route(f"/api/trace/job/{{job_id}}/{suffix}", trace_job, suffix=suffix)
    generic = GenericJob(GenericJobs.of_trace(service))
    app.add_route("/api/job/{job_id}", generic)
    app.add_route("/api/job/{job_id}/result", generic, suffix="result")
    app.add_route("/api/job/{job_id}/abandon", generic, suffix="abandon")
    # The routes the kinds declare in their own folders, each served by the resource of its way.
    for route in installed.routes():
        app.add_route(route.path, resource(route, env, body_cap, offloop))
    app.add_route("/api/v1/jobs", jobs)
    app.add_route("/api/v1/jobs/{job_id}", jobs, suffix="item")
    for action in ("cancel", "retry"):
        app.add_route(f"/api/v1/jobs/{{job_id}}/{action}", jobs, suffix=action)
    app.add_route("/api/v1/jobs/{job_id}/export", jobs, suffix="export")
    _add_monitor(app, settings, broker)
    app.add_route("/healthz", Health())
    ready = Ready(broker, WorkerRegistry(broker), settings.queue, settings.api_retry_after_s,
                  SourceCheck(_source_ping(service, settings)))
    app.add_route("/readyz", ready)
    app.add_route("/openapi.json", OpenApi(openapi.document(settings)))
    app.add_route("/metrics", metrics_resource)  # open like the probes (auth_required = False)
    check_routes(app)
    return app


def _source_ping(service: TraceService, settings: ApiSettings):
    """``ping()`` of the source /readyz checks, built on first use (a misconfigured source is
    then "unreachable" with the reason, not an API that does not start)."""
    built = []

    def ping() -> bool:
        if not built:
            built.append(service.source_factory(settings))
        return built[0].ping()

    return ping


def _add_monitor(app: falcon.App, settings: ApiSettings, broker: Broker) -> None:
    """The web monitor (``/``, ``/ui/...``) and the JSON it polls beside ``/api/v1/jobs``."""
    operators = Operators(parse_admins(settings.api_admins))
    page = ui.Ui(ui.load())
    app.add_route("/", page)
    app.add_route("/ui", page)
    app.add_route("/ui/{name}", page, suffix="file")
    app.add_route("/api/v1/me", Me(operators))
    app.add_route("/api/v1/states", States())
    app.add_route("/api/v1/queues", Queues(broker, settings.queue, session_places(broker.client, settings)))
    app.add_route("/api/v1/workers", Workers(broker, WorkerRegistry(broker)))
    app.add_route("/api/v1/redis", RedisHealth(broker))
    dead = DeadLetters(broker, operators, settings.queue)
    app.add_route("/api/v1/dead-letters", dead)
    for action in ("requeue", "purge"):
        app.add_route(f"/api/v1/dead-letters/{action}", dead, suffix=action)


def get_app() -> falcon.App:
    """The app of one gunicorn worker, configured from the environment."""
    settings = ApiSettings.from_env()
    logs.setup(settings.log_format, settings.log_level)
    broker = Broker(settings)
    set_broker(broker)  # the process's broker, for actors sent from here
    return create_app(settings, broker)
