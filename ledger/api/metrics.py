"""The ledger-wide Prometheus metrics: what any process that can read the ledger can export.

:class:`LedgerCollector` reads, at each scrape, the jobs per status and type (the queue view),
each tracked projection's lag in events, and the worker pools' reports with the health judged
from them (:mod:`ledger.api.pools`). Both front ends export it — a worker's
``--metrics-port`` server (beside its own pool's metrics: :mod:`ledger.runtime.pool_metrics`) and
the HTTP server's ``GET /metrics`` (:func:`render_ledger_metrics`) — so neither imports the
other. Label values are bounded: job types, statuses, projection names, pool states; never a
job id or a pool id (pool ids change with every restart).

Metric names and types are listed in ``docs/operations.md`` (Metrics).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ledger.api.reader import Reader
from ledger.core.tokens import Role
from ledger.core.values import JobStatus

TOTALS = (
    ("jobledger_jobs_enqueued", "job_enqueued", "Jobs enqueued (job_enqueued events)."),
    (
        "jobledger_jobs_succeeded",
        "job_succeeded",
        "Job runs that succeeded (job_succeeded events).",
    ),
    (
        "jobledger_job_attempts_failed",
        "job_failed",
        "Failed attempts, whether retried or dead-lettered after (job_failed events).",
    ),
    (
        "jobledger_jobs_dead_lettered",
        "job_dead_lettered",
        "Jobs dead-lettered (job_dead_lettered events).",
    ),
)
"""The ledger's counters: (metric name without ``_total``, the event counted, help)."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The exposition format :func:`render_ledger_metrics` writes."""


class LedgerCollector(Collector):
    """Reads the ledger-wide figures through ``reader`` at every scrape (a few small
    aggregates: one over the queue view, the tracking rows, the pools' rows)."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "jobledger_jobs",
            "Jobs in the ledger by status and job type (the queue view).",
            labels=["status", "type"],
        )
        counts = self._reader.counts_by_type()
        types = sorted({job_type for _, job_type in counts})
        for job_type in types:
            # Every status of every type, zeros included, so a rate or an alert on a
            # series that has never been non-zero still has a series to look at.
            for status in JobStatus:
                jobs.add_metric([status.value, job_type], counts.get((status.value, job_type), 0))
        yield jobs
        yield from self._totals(types)
        lag = GaugeMetricFamily(
            "jobledger_projection_lag_events",
            "Events of the history a tracked projection has yet to apply.",
            labels=["projection"],
        )
        for name, events in sorted(self._reader.projection_lags().items()):
            lag.add_metric([name], events)
        yield lag
        health = self._reader.health()
        pools = GaugeMetricFamily(
            "jobledger_pools",
            "Worker pools by state: live and ok, live and degraded, stale (counted dead).",
            labels=["state"],
        )
        states = {"ok": 0, "degraded": 0, "stale": 0}
        for pool in health.pools:
            states["stale" if pool.stale else pool.report.status] += 1
        for state, n in states.items():
            pools.add_metric([state], n)
        yield pools
        yield GaugeMetricFamily(
            "jobledger_health_ok",
            "1 when the ledger's health is ok, 0 when degraded (no live pool, a stale pool, "
            "a pool reporting itself degraded).",
            value=1 if health.status == "ok" else 0,
        )
        tokens = GaugeMetricFamily(
            "jobledger_api_tokens",
            "Active (not revoked) API tokens by role.",
            labels=["role"],
        )
        active = [token.role for token in self._reader.tokens.all() if token.active]
        for role in Role:
            tokens.add_metric([role.value], active.count(role))
        yield tokens

    def _totals(self, known_types: list[str]) -> Iterator[Metric]:
        """The events counted by :data:`TOTALS` per job type, from the audit view: as far as
        it has applied the history (``jobledger_projection_lag_events{projection="audit"}``
        says how far that is), so a counter lags but never goes back."""
        totals = self._reader.event_totals()
        types = sorted({*known_types, *(job_type for _, job_type in totals)})
        for name, event, help_text in TOTALS:
            counter = CounterMetricFamily(name, help_text, labels=["type"])
            for job_type in types:
                counter.add_metric([job_type], totals.get((event, job_type), 0))
            yield counter


def ledger_registry(reader: Reader) -> CollectorRegistry:
    """A registry holding only :class:`LedgerCollector` over ``reader``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(reader))
    return registry


def render_ledger_metrics(reader: Reader) -> bytes:
    """The ledger-wide metrics in Prometheus' text format (:data:`CONTENT_TYPE`), read now."""
    return generate_latest(ledger_registry(reader))
