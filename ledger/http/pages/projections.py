"""``/projections``: each view's mode, versions (code and recorded: stale when they differ),
position and lag in events: like ``GET /api/v1/projections``, for a token of no org (an
org-scoped one is 403)."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.core.tokens import TokenState
from ledger.http.auth import EVERY_ORG
from ledger.http.pages.view import page


@get("/projections", guards=EVERY_ORG, sync_to_thread=True)
def projections(request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState) -> Template:
    return page(request, "projections.html", caller, projections=ledger.projections().status())
