"""``GET /metrics``: the ledger-wide Prometheus metrics (``ledger.api.metrics``), for a
scraper holding a token of no org (any role); an org token is 403, since the figures span
every org (docs/http.md, "Metrics")."""

from __future__ import annotations

from litestar import Response, get

from ledger.api.ledger import Ledger
from ledger.api.metrics import CONTENT_TYPE, render_ledger_metrics
from ledger.http.auth import EVERY_ORG


@get("/metrics", guards=EVERY_ORG, sync_to_thread=True, media_type=CONTENT_TYPE)
def metrics(ledger: Ledger) -> Response[bytes]:
    """Jobs by status and type, the ledger's event counters, projection lag, pool health and
    tokens by role, read now, in Prometheus' text format."""
    return Response(render_ledger_metrics(ledger), media_type=CONTENT_TYPE)
