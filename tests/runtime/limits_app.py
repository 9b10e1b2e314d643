"""The handlers of the concurrency-limit process tests (``jobledger worker --app
limits_app:registry`` with ``tests/runtime`` on ``PYTHONPATH``).

``limited.work`` holds its lease a little while (its payload's ``ms``), so leases of two
worker processes overlap unless the limit keeps them apart.
"""

from __future__ import annotations

import asyncio

from ledger.runtime.handlers import JobContext, Registry

registry = Registry()


@registry.handler("limited.work")
async def work(ctx: JobContext) -> None:
    await asyncio.sleep(ctx.payload.get("ms", 10) / 1000)
