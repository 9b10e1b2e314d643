"""The ASGI app: routes under ``/api/v1`` over one open ledger, ``/health`` beside them, and
the OpenAPI document at ``/api/v1/schema/openapi.json`` (the JSON only: no page rendering
it, which would load scripts from another origin)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Litestar, Request, Router, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Response
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig
from litestar.types import Middleware

from ledger.api.event_feed import EventFeed
from ledger.api.ledger import Ledger
from ledger.api.shaping import verify_report_json
from ledger.core.errors import LedgerError
from ledger.http import (
    capabilities,
    enqueue,
    errors,
    hash_chain,
    jobs,
    metrics,
    operations,
    pages,
    projections,
    queues,
    reads,
    sources,
    stream,
    writes,
)
from ledger.http.auth import (
    STREAM_PATH,
    TokenAuthentication,
    bearer_token,
    caller_of,
    sees_every_org,
)
from ledger.http.event_hub import DEFAULT_POLL_S, EventHub
from ledger.http.headers import SecurityHeaders
from ledger.http.health import health_of
from ledger.http.hosts import AllowedHosts, HostCheck
from ledger.http.pages.view import FILTERS
from ledger.http.request_body import LedgerRequest
from ledger.http.sessions import Sessions
from ledger.http.verify_tasks import VerifyTasks

API_PREFIX = "/api/v1"
SCHEMA_PATH = f"{API_PREFIX}/schema"
"""Litestar serves the document at ``<this>/openapi.json`` (and ``openapi.yaml``)."""


HERE = Path(__file__).parent


def templates() -> TemplateConfig[JinjaTemplateEngine]:
    """The dashboard's Jinja2 templates, autoescaped, an undefined name an error."""
    environment = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html", "svg"], default_for_string=True),
        undefined=StrictUndefined,
    )
    environment.filters.update(FILTERS)
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


API_ROUTES = (
    jobs.list_jobs,
    jobs.show_job,
    jobs.retry_job,
    jobs.cancel_job,
    reads.dead_letters,
    reads.stats,
    reads.audit,
    reads.definitions,
    reads.workflows,
    reads.workflow,
    writes.requeue_dead_letter,
    writes.complete_step,
    writes.cancel_workflow,
    enqueue.enqueue_job,
    enqueue.enqueue_jobs,
    operations.enable_type,
    operations.disable_type,
    operations.requeue_dead_letters,
    queues.pause_queue,
    queues.resume_queue,
    sources.sources,
    sources.source,
    projections.projections,
    projections.start_verify,
    projections.verify_result,
    hash_chain.integrity_head,
    hash_chain.start_integrity_verify,
    hash_chain.integrity_verify_result,
    capabilities.capabilities,
    stream.event_stream,
)
"""The routes under :data:`API_PREFIX`, in the order the OpenAPI document lists them."""


def build_app(
    ledger: Ledger,
    *,
    stream_poll_s: float = DEFAULT_POLL_S,
    sessions: Sessions | None = None,
    allowed_hosts: Collection[str] = (),
) -> Litestar:
    """The app serving ``ledger`` (the caller opens it and closes it after the server);
    ``app.state.event_hub`` is the live stream's follower (close it to end open streams);
    ``sessions`` holds the dashboard's sessions and login codes (new and empty by default);
    ``allowed_hosts`` are the names the server answers to besides ``localhost`` and IP
    addresses (:mod:`ledger.http.hosts`)."""
    signer = sessions or Sessions()
    tasks = VerifyTasks(lambda: verify_report_json(ledger.projections().verify()), ledger.clock.now)
    chain_tasks = hash_chain.IntegrityTasks(
        lambda: hash_chain.integrity_verify(ledger), ledger.clock.now
    )
    hub = EventHub(EventFeed(ledger), poll_s=stream_poll_s)

    def close_hub() -> None:
        # Litestar passes the app to a hook that takes an argument: this one takes none.
        hub.close()

    api = Router(API_PREFIX, route_handlers=list(API_ROUTES))
    static = create_static_files_router("/static", directories=[HERE / "static"])
    app = Litestar(
        route_handlers=[health_route(ledger), metrics.metrics, api, pages.router(), static],
        dependencies={
            **route_dependencies(ledger, signer, tasks, hub),
            "integrity_tasks": Provide(lambda: chain_tasks, sync_to_thread=False),
        },
        state=State({"event_hub": hub}),
        on_shutdown=[close_hub],
        middleware=middleware_stack(ledger, signer, allowed_hosts),
        request_class=LedgerRequest,
        template_config=templates(),
        exception_handlers={
            LedgerError: errors.ledger_error,
            ValidationException: errors.invalid_request,
            HTTPException: errors.http_error,
        },
        openapi_config=OpenAPIConfig(
            title="jobledger",
            version="1",
            path=SCHEMA_PATH,
            render_plugins=[JsonRenderPlugin()],  # no Swagger/ReDoc page: their scripts are a CDN's
        ),
    )
    # The pages open an EventSource only when the stream is served (docs/http.md, "Live").
    app.state.live_stream = any(route.path == STREAM_PATH for route in app.routes)
    return app


def health_route(ledger: Ledger) -> HTTPRouteHandler:
    """``GET /health`` over ``ledger``, outside :data:`API_PREFIX`."""

    @get("/health", sync_to_thread=True)
    def health(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        """``ok`` or ``degraded`` (no token needed); the reasons and details (views, pools)
        with a token of no org."""
        return health_of(ledger, details=sees_every_org(bearer_token(ledger, request)))

    return health


def route_dependencies(
    ledger: Ledger, sessions: Sessions, verify_tasks: VerifyTasks, event_hub: EventHub
) -> dict[str, Provide]:
    """What the route handlers take by name: the one open ledger, the caller (from the
    request's token or session), the background verifications, the dashboard's sessions and
    the live stream's follower."""

    def provide_ledger() -> Ledger:
        return ledger

    def provide_sessions() -> Sessions:
        return sessions

    def provide_verify_tasks() -> VerifyTasks:
        return verify_tasks

    def provide_event_hub() -> EventHub:
        return event_hub

    return {
        "ledger": Provide(provide_ledger, sync_to_thread=False),
        "caller": Provide(caller_of, sync_to_thread=False),
        "verify_tasks": Provide(provide_verify_tasks, sync_to_thread=False),
        "sessions": Provide(provide_sessions, sync_to_thread=False),
        "event_hub": Provide(provide_event_hub, sync_to_thread=False),
    }


def middleware_stack(
    ledger: Ledger, sessions: Sessions, allowed_hosts: Collection[str]
) -> list[Middleware]:
    """Outermost first: the Host check, the security headers, then the token (or session)
    authentication."""
    return [
        DefineMiddleware(HostCheck, allowed=AllowedHosts(allowed_hosts)),
        SecurityHeaders,
        DefineMiddleware(TokenAuthentication, reader=ledger, sessions=sessions),
    ]
