"""The ASGI app: routes under ``/api/v1`` over one open ledger, ``/health`` beside them, and
the OpenAPI document at ``/api/v1/schema/openapi.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Litestar, Router, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Response
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig

from ledger.api.event_feed import EventFeed
from ledger.api.ledger import Ledger
from ledger.api.shaping import verify_report_json
from ledger.core.errors import LedgerError
from ledger.http import (
    capabilities,
    enqueue,
    errors,
    jobs,
    json_bodies,
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
from ledger.http.auth import STREAM_PATH, TokenAuthentication, caller_of
from ledger.http.event_hub import DEFAULT_POLL_S, EventHub
from ledger.http.health import health_of
from ledger.http.pages.view import FILTERS
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


def build_app(
    ledger: Ledger,
    *,
    stream_poll_s: float = DEFAULT_POLL_S,
    sessions: Sessions | None = None,
) -> Litestar:
    """The app serving ``ledger`` (the caller opens it and closes it after the server);
    ``app.state.event_hub`` is the live stream's follower (close it to end open streams);
    ``sessions`` signs the dashboard's cookies (a new key by default)."""
    signer = sessions or Sessions()

    def provide_ledger() -> Ledger:
        return ledger

    def provide_sessions() -> Sessions:
        return signer

    tasks = VerifyTasks(lambda: verify_report_json(ledger.projections().verify()), ledger.clock.now)

    def provide_verify_tasks() -> VerifyTasks:
        return tasks

    hub = EventHub(EventFeed(ledger), poll_s=stream_poll_s)

    def provide_event_hub() -> EventHub:
        return hub

    @get("/health", sync_to_thread=True)
    def health() -> Response[dict[str, Any]]:
        """``ok`` or ``degraded`` with the reasons (no token needed)."""
        return health_of(ledger)

    api = Router(
        API_PREFIX,
        route_handlers=[
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
            capabilities.capabilities,
            stream.event_stream,
        ],
        before_request=json_bodies.refuse_duplicate_keys,
    )
    static = create_static_files_router("/static", directories=[HERE / "static"])
    app = Litestar(
        route_handlers=[health, metrics.metrics, api, pages.router(), static],
        dependencies={
            "ledger": Provide(provide_ledger, sync_to_thread=False),
            "caller": Provide(caller_of, sync_to_thread=False),
            "verify_tasks": Provide(provide_verify_tasks, sync_to_thread=False),
            "sessions": Provide(provide_sessions, sync_to_thread=False),
            "event_hub": Provide(provide_event_hub, sync_to_thread=False),
        },
        state=State({"event_hub": hub}),
        on_shutdown=[hub.close],
        middleware=[DefineMiddleware(TokenAuthentication, reader=ledger, sessions=signer)],
        template_config=templates(),
        exception_handlers={
            LedgerError: errors.ledger_error,
            ValidationException: errors.invalid_request,
            HTTPException: errors.http_error,
        },
        openapi_config=OpenAPIConfig(title="jobledger", version="1", path=SCHEMA_PATH),
    )
    # The pages open an EventSource only when the stream is served (docs/http.md, "Live").
    app.state.live_stream = any(route.path == STREAM_PATH for route in app.routes)
    return app
