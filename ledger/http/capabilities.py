"""``GET /api/v1/capabilities``: what this server offers, so a client (a dashboard, a
script) can tell what it may call before calling it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import Request, get

from ledger.api.ledger import Ledger
from ledger.core.tokens import Role, TokenState


def _version() -> str:
    try:
        return version("jobledger")
    except PackageNotFoundError:  # running from a tree that is not installed
        return "unknown"


@get("/capabilities")
async def capabilities(
    ledger: Ledger, caller: TokenState, request: Request[Any, Any, Any]
) -> dict[str, Any]:
    """The server's version and backend, the roles, the calling token's role and org, and
    every route served (method and path; the OpenAPI document has their parameters)."""
    endpoints = sorted(
        {
            (method, route.path)
            for route in request.app.routes
            for method in getattr(route, "methods", ())
            if method not in ("HEAD", "OPTIONS")
        }
    )
    return {
        "version": _version(),
        "backend": ledger.store.backend,
        "roles": [role.value for role in Role],
        "token": {"role": caller.role.value, "org": caller.org},
        "endpoints": [{"method": method, "path": path} for method, path in endpoints],
    }
