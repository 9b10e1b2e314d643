"""The dashboard's pages: server-rendered HTML (Jinja2 templates in ``../templates``), one
module per page, each handler reading through the same reader calls as the API."""

from __future__ import annotations

from litestar import Router
from litestar.exceptions import HTTPException
from litestar.types import ControllerRouterHandler

from ledger.core.errors import LedgerError
from ledger.http.pages import (
    dead_letters,
    job_list,
    job_page,
    login,
    overview,
    projections,
    workflows,
)
from ledger.http.pages.errors import page_error

HANDLERS: list[ControllerRouterHandler] = [
    login.login_page,
    login.login,
    login.logout,
    overview.overview,
    overview.overview_fragment,
    job_list.job_list,
    job_page.job_page,
    job_page.job_body,
    job_page.retry,
    job_page.cancel,
    dead_letters.dead_letters,
    dead_letters.requeue,
    workflows.workflow_list,
    workflows.workflow_page,
    projections.projections,
]


def router() -> Router:
    """The pages at ``/`` (every answer of the app has the content security policy:
    :mod:`ledger.http.headers`)."""
    return Router(
        "/",
        route_handlers=HANDLERS,
        include_in_schema=False,
        exception_handlers={LedgerError: page_error, HTTPException: page_error},
    )
