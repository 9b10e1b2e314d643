"""What every page's template is given: the caller (its role decides which buttons show),
whether the live event stream is served, and the formatting filters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Request
from litestar.response import Template

from ledger.api.shaping import iso_millis
from ledger.core.tokens import Role, TokenState
from ledger.http.auth import sees_every_org
from ledger.views.audit_query import EVENT_NAMES


def page(
    request: Request[Any, Any, Any], name: str, caller: TokenState, **context: Any
) -> Template:
    """``templates/<name>`` with the caller's context added to ``context``."""
    return Template(
        template_name=name,
        context={
            "caller": caller,
            "can_operate": caller.role.may(Role.OPERATE),
            # what spans orgs (pools, views) shows only where the API would answer it
            "every_org": sees_every_org(caller),
            "live": bool(getattr(request.app.state, "live_stream", False)),
            # SSE messages are named by their event: the page listens for each name
            "stream_events": EVENT_NAMES,
            **context,
        },
    )


def when(moment: datetime | None) -> str:
    """A time as the API writes it (UTC, milliseconds); ``—`` for none."""
    return "—" if moment is None else iso_millis(moment)


def seconds(value: float | None) -> str:
    """A duration in words short enough for a table cell."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


FILTERS = {"when": when, "seconds": seconds}
