"""``GET /metrics``: the ledger-wide Prometheus metrics (``ledger.api.metrics``) and the
server's own (open event streams), for a scraper holding a token of no org (any role); an
org token is 403, since the figures span every org (docs/http.md, "Metrics")."""

from __future__ import annotations

from collections.abc import Iterator

from litestar import Response, get
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ledger.api.ledger import Ledger
from ledger.api.metrics import CONTENT_TYPE, ledger_registry
from ledger.http.auth import EVERY_ORG
from ledger.http.event_hub import EventHub


class StreamsCollector(Collector):
    """How many live event streams this server process holds open."""

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "jobledger_event_streams_open",
            "Live event streams (GET /api/v1/events/stream) this server holds open.",
            value=self._hub.subscribers,
        )


@get("/metrics", guards=EVERY_ORG, sync_to_thread=True, media_type=CONTENT_TYPE)
def metrics(ledger: Ledger, event_hub: EventHub) -> Response[bytes]:
    """Jobs by status and type, the ledger's event counters, projection lag, pool health,
    tokens by role and open event streams, read now, in Prometheus' text format."""
    registry = ledger_registry(ledger)
    registry.register(StreamsCollector(event_hub))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)
