"""A registry whose one no-op handler counts its runs and says when the N-th has run: what
the drains of ``bench_growth.py`` and ``profile_server.py`` wait on (no polling of the
database, which would itself cost the CPU they measure)."""

from __future__ import annotations

import asyncio
from typing import Any


def counting_noop(job_type: str, n: int) -> tuple[Any, asyncio.Event]:
    """A :class:`~ledger.runtime.handlers.Registry` with a no-op async handler of
    ``job_type``, and the event set once it has run ``n`` times (``ledger`` is imported here,
    after the caller chose its ``PYTHONPATH``)."""
    from ledger.runtime.handlers import JobContext, Registry

    handled = 0
    done = asyncio.Event()
    registry = Registry()

    @registry.handler(job_type)
    async def noop(ctx: JobContext) -> None:
        nonlocal handled
        handled += 1
        if handled == n:
            done.set()

    return registry, done
