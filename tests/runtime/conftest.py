"""Runtime fixtures: a ledger with the sync job type, and a controllable ingest handler.

The handler stands in for haiku's document client (the thing a job talks to downstream);
the database underneath is always real.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ledger import BackoffPolicy, FakeClock, Ledger
from ledger.runtime.handlers import JobContext, Registry, Result
from ledger.runtime.health import PoolStats
from ledger.runtime.pool import WorkerPool
from ledger.testing import drain

INGEST = "ingest"


@dataclass
class Downstream:
    """What the ingest handler does: return a result, raise, or run a custom coroutine."""

    revision: str | None = "r"
    content_hash: str | None = "m"
    raises: BaseException | None = None
    custom: Callable[[JobContext], Awaitable[Any]] | None = None
    calls: list[JobContext] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def __call__(self, ctx: JobContext) -> Any:
        self.calls.append(ctx)
        if self.custom is not None:
            return await self.custom(ctx)
        if self.raises is not None:
            raise self.raises
        subject = ctx.subject
        if subject is not None and subject.op == "delete":
            self.deleted.append(subject.uri)
            return Result(output={"deleted": subject.uri})
        return Result(output={"doc": "d"}, revision=self.revision, content_hash=self.content_hash)


@pytest.fixture
def downstream() -> Downstream:
    return Downstream()


@pytest.fixture
def registry(downstream: Downstream) -> Registry:
    registry = Registry()
    registry.handler(INGEST)(downstream)
    return registry


@pytest.fixture
def sync_ledger(db_url: str, clock: FakeClock) -> Iterator[Ledger]:
    """A ledger on each backend where 'ingest' retries after 60 s with no jitter."""
    with Ledger.open(db_url, clock=clock, pool_size=4) as ledger:
        ledger.define(INGEST, backoff=BackoffPolicy(base_s=60.0, max_s=600.0, jitter=0.0))
        yield ledger


SEED_POOL_SETTINGS: dict[str, Any] = {
    "concurrency": 2,
    "poll_interval_s": 0.05,
    "reaper_interval_s": 60.0,
    "lease_s": 60.0,
}
"""The seed's pool settings, for pools and for the ledger.testing helpers alike."""


@pytest.fixture
async def make_pool(
    sync_ledger: Ledger, registry: Registry
) -> AsyncIterator[Callable[..., WorkerPool]]:
    """Build pools with the seed's defaults; any still running are stopped afterwards."""
    pools: list[WorkerPool] = []

    def build(**kwargs: Any) -> WorkerPool:
        pool = WorkerPool(sync_ledger, registry, **{**SEED_POOL_SETTINGS, **kwargs})
        pools.append(pool)
        return pool

    yield build
    for pool in pools:
        await pool.stop()  # a no-op for pools a test already stopped


@pytest.fixture
def drain_queue(sync_ledger: Ledger, registry: Registry) -> Callable[..., Awaitable[PoolStats]]:
    """``ledger.testing.drain`` over the sync ledger and the ingest registry, with the seed's
    settings (overridable per call)."""

    async def run(**kwargs: Any) -> PoolStats:
        return await drain(sync_ledger, registry, **{**SEED_POOL_SETTINGS, **kwargs})

    return run
