"""``/``: the queue at a glance (counts by status and type, throughput and run time per
minute over the last hour, the oldest due job's wait, pools' health, projections' lag; the
pools and projections only for a token of no org, as the API's rule says).

The fragment ``/fragments/overview`` is the page's body: the page's script fetches it again
when the event stream says something changed (and every 30 s besides)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from litestar import Request, get
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.core.tokens import TokenState
from ledger.core.values import JobStatus
from ledger.http.auth import scoped_org, sees_every_org
from ledger.http.drawings.series import EVENTS, MINUTES, per_minute
from ledger.http.pages.view import page
from ledger.views.audit_query import MAX_LIMIT, AuditQuery

STATUSES = [status.value for status in JobStatus]


def overview_context(ledger: Ledger, caller: TokenState) -> dict[str, Any]:
    """Everything the overview shows, of the caller's org (every org for an admin)."""
    org = scoped_org(caller, None)
    now = ledger.clock.now()
    stats = ledger.stats(now, org=org)
    query = AuditQuery(
        events=EVENTS,
        org=org,
        since=now - timedelta(minutes=MINUTES),
        order="oldest",
        limit=MAX_LIMIT,
    ).check()
    audit = ledger.audit(query, catch_up=False)  # stats just caught the audit view up
    series = per_minute(audit.rows, now)
    types = sorted(stats.by_type)
    every_org = sees_every_org(caller)  # the pools and views span orgs: not for an org token
    health = ledger.health(now) if every_org else None
    return {
        "stats": stats,
        "statuses": STATUSES,
        "type_rows": [
            {"job_type": t, "counts": [stats.by_type[t].get(s, 0) for s in STATUSES]} for t in types
        ],
        "total": sum(stats.by_status.values()),
        "series": series.columns(),
        "series_capped": audit.next_cursor is not None,
        "series_limit": MAX_LIMIT,
        "pools": health.pools if health else [],
        "pool_reasons": health.reasons if health else [],
        "projections": ledger.projections().status() if every_org else [],
    }


@get("/", sync_to_thread=True)
def overview(request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState) -> Template:
    return page(request, "overview.html", caller, **overview_context(ledger, caller))


@get("/fragments/overview", sync_to_thread=True)
def overview_fragment(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState
) -> Template:
    return page(request, "fragments/overview.html", caller, **overview_context(ledger, caller))
