"""A pool never holds more jobs leased than its declared depth, ``concurrency + prefetch``:
a finished job keeps its room until its outcome is recorded, so the next claim cannot commit
before the last outcomes (bench/compare.py measured 2-8x the declared depth before)."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

from ledger import EnqueueRequest, Ledger
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool
from ledger.store.config import sqlite_path

JOBS = 300
ENDS = ("job_succeeded", "job_failed", "job_released", "job_cancelled")


def most_leased_at_once(db_url: str) -> int:
    """The most jobs leased at once, from the events in commit order (each job_leased opens
    a lease, the event that ends the attempt closes it)."""
    query = "SELECT originator_id, topic FROM jl_events ORDER BY {}"
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(query.format("notification_id")).fetchall()
    else:  # one writer at a time: the rowid is the commit order
        with sqlite3.connect(sqlite_path(db_url)) as conn:
            rows = conn.execute(query.format("rowid")).fetchall()
    leased: set[object] = set()
    most = 0
    for originator, topic in rows:
        name = str(topic).split(".")[0]
        if name == "job_leased":
            leased.add(originator)
            most = max(most, len(leased))
        elif name in ENDS:
            leased.discard(originator)
    return most


@pytest.mark.parametrize("batch_turns", [False, True])
@pytest.mark.parametrize(("concurrency", "prefetch"), [(2, 0), (4, 4)])
async def test_the_pool_leases_no_more_than_its_declared_depth(
    db_url: str, concurrency: int, prefetch: int, batch_turns: bool
) -> None:
    """Fast handlers, outcomes batched for 20 ms, with batch turns or without: at no point in
    the history does the pool hold more than ``concurrency + prefetch`` leases. Read two
    ways: from the events in id order (commit order under one writer at a time; on
    PostgreSQL the worker path no longer takes the table lock, so ids only approximate it),
    and from the queue view's committed snapshots, sampled while the pool runs."""
    registry = Registry()

    @registry.handler("fast")
    async def fast(ctx: JobContext) -> int:
        return int(ctx.payload["i"])

    with Ledger.open(db_url, pool_size=4) as ledger:
        ledger.define("fast")
        ledger.enqueue_many(
            [EnqueueRequest(job_type="fast", payload={"i": i}) for i in range(JOBS)]
        )
        pool = WorkerPool(
            ledger, registry, concurrency=concurrency, prefetch=prefetch,
            completion_delay_s=0.02, poll_interval_s=0.05, batch_turns=batch_turns,
        )  # fmt: skip
        seen_leased = 0
        await pool.start()
        try:
            while pool.stats.succeeded < JOBS:
                seen_leased = max(seen_leased, ledger.counts().get("leased", 0))
                await asyncio.sleep(0.01)
        finally:
            await pool.stop()
        assert ledger.counts() == {"succeeded": JOBS}
    assert seen_leased <= concurrency + prefetch
    assert most_leased_at_once(db_url) <= concurrency + prefetch
