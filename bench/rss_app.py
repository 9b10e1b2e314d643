"""The handlers `bench_rss.py` runs `jobledger worker --app rss_app:registry` with: a no-op."""

from __future__ import annotations

from ledger.runtime.handlers import JobContext, Registry

JOB_TYPE = "bench.rss.noop"

registry = Registry()


@registry.handler(JOB_TYPE)
async def noop(ctx: JobContext) -> None:
    """Do nothing: the worker's own memory is what is measured."""
