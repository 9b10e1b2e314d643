"""AsyncLedger: the sync ledger's calls, awaited without blocking the loop; ``wait`` woken
by LISTEN (PostgreSQL) or a short poll (SQLite); and the application's AsyncConnection
transaction joined (PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from ledger import (
    DefinitionNotFoundError,
    Enqueued,
    InvalidRequestError,
    JobNotFoundError,
    JobStatus,
    Ledger,
)
from ledger.api.async_ledger import AsyncLedger
from ledger.clock import FakeClock


@pytest.fixture
async def async_ledger(db_url: str, clock: FakeClock) -> AsyncIterator[AsyncLedger]:
    """An async ledger on each backend with job type 't' defined."""
    opened = await AsyncLedger.open(db_url, clock=clock)
    await opened.define("t")
    yield opened
    await opened.close()


async def test_fifty_tasks_enqueue_at_once_and_every_job_is_there(
    async_ledger: AsyncLedger,
) -> None:
    """50 concurrent tasks of 10 enqueues each: 500 distinct jobs, all pending, and the
    views verify."""

    async def producer(n: int) -> list[UUID | None]:
        return [(await async_ledger.enqueue("t", {"task": n, "i": i})).job_id for i in range(10)]

    found = [
        job_id for batch in await asyncio.gather(*map(producer, range(50))) for job_id in batch
    ]
    ids = [job_id for job_id in found if job_id is not None]
    assert len(set(ids)) == 500
    states = await async_ledger.get_many(ids)
    assert len(states) == 500 and all(s.status is JobStatus.PENDING for s in states.values())
    report = await async_ledger.run(lambda: async_ledger.ledger.projections().verify())
    assert report.clean, report


async def test_the_loop_runs_while_an_enqueue_waits_for_a_lock(
    async_ledger: AsyncLedger, db_url: str
) -> None:
    """An enqueue held up by another transaction's lock does not hold the loop: another
    task runs to its end meanwhile, and the enqueue finishes once the lock goes."""
    release = threading.Event()
    locked = threading.Event()

    def hold_the_write_lock() -> None:
        # Another session's transaction that every keyed enqueue must wait for.
        if db_url.startswith("postgres"):
            with psycopg.connect(db_url) as conn:
                conn.execute("LOCK TABLE jl_events IN EXCLUSIVE MODE")
                locked.set()
                release.wait(30)
        else:
            import sqlite3

            from ledger.store.config import sqlite_path

            conn = sqlite3.connect(sqlite_path(db_url), isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            locked.set()
            release.wait(30)
            conn.rollback()
            conn.close()

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    assert await asyncio.to_thread(locked.wait, 10)
    enqueue = asyncio.create_task(async_ledger.enqueue("t", idempotency_key="held"))
    ticks = 0
    while ticks < 20:  # the loop turns while the enqueue waits
        await asyncio.sleep(0)
        ticks += 1
    assert not enqueue.done()
    release.set()
    job_id = (await asyncio.wait_for(enqueue, 30)).job_id
    await asyncio.to_thread(holder.join)
    assert job_id is not None and await async_ledger.get(job_id) is not None


async def test_wait_returns_when_another_thread_finishes_the_job(
    async_ledger: AsyncLedger,
) -> None:
    """A job a worker (here a sync ledger in a thread) claims and completes: ``wait``
    returns its succeeded state."""
    job_id = (await async_ledger.enqueue("t")).job_id
    assert job_id is not None
    sync = async_ledger.ledger

    def work() -> None:
        (job,) = sync.claim("w")
        assert job.lease is not None
        sync.succeed(job.lease, output={"ok": True})

    waiting = asyncio.create_task(async_ledger.wait(job_id, timeout=30))
    await asyncio.to_thread(work)
    state = await waiting
    assert state.status is JobStatus.SUCCEEDED


async def test_wait_gives_the_live_state_at_its_timeout(async_ledger: AsyncLedger) -> None:
    """A job nobody works: ``wait`` returns after its timeout with the job still pending."""
    job_id = (await async_ledger.enqueue("t")).job_id
    assert job_id is not None
    state = await async_ledger.wait(job_id, timeout=0.1)
    assert state.status is JobStatus.PENDING


async def test_wait_for_an_unknown_job_raises(async_ledger: AsyncLedger) -> None:
    """``job.not_found`` rather than waiting out the timeout."""
    with pytest.raises(JobNotFoundError):
        await async_ledger.wait(UUID(int=7), timeout=30)


async def test_cancel_through_the_async_ledger(async_ledger: AsyncLedger) -> None:
    """``cancel`` is the sync ledger's: the job ends cancelled, and a waiter sees it."""
    job_id = (await async_ledger.enqueue("t")).job_id
    assert job_id is not None
    waiting = asyncio.create_task(async_ledger.wait(job_id, timeout=30))
    await async_ledger.cancel(job_id)
    assert (await waiting).status is JobStatus.CANCELLED


@pytest.mark.postgres
async def test_postgres_async_connection_commit_and_rollback(pg_url: str) -> None:
    """The application's AsyncConnection: a rolled-back job is gone, a committed one (with
    the application's own row) is there, and a rolled-back savepoint takes only its job."""
    async with await AsyncLedger.open(pg_url) as ledger:
        await ledger.define("t")
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await conn.execute("CREATE TABLE orders (item text)")
            await conn.commit()
            async with ledger.using(conn) as tx:
                phantom = (await tx.enqueue("t", idempotency_key="once")).job_id
                assert phantom is not None
                seen = await tx.get(phantom)
                assert seen is not None and seen.status is JobStatus.PENDING
                assert await ledger.get(phantom) is None
            await conn.rollback()
            tx = ledger.using(conn)
            await conn.execute("INSERT INTO orders VALUES ('paid')")
            kept = (await tx.enqueue("t", idempotency_key="once")).job_id
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    dropped = (await tx.enqueue("t", {"n": 2})).job_id
                    raise RuntimeError("changed its mind")
            await conn.commit()
            rows = await (await conn.execute("SELECT item FROM orders")).fetchall()
        assert rows == [("paid",)]
        assert await ledger.get(phantom) is None
        assert kept is not None and kept != phantom and await ledger.get(kept) is not None
        assert dropped is not None and await ledger.get(dropped) is None
        sync = ledger.ledger
        report = await ledger.run(lambda: sync.projections().verify())
        assert report.clean, report
        findings = await ledger.run(
            lambda: [f for r in sync.replay_check_all() for f in r.findings]
        )
        assert findings == []


@pytest.mark.postgres
async def test_postgres_async_connection_in_autocommit_is_refused(pg_url: str) -> None:
    """An autocommit AsyncConnection outside ``conn.transaction()`` is refused; inside one
    it is joined."""
    async with (
        await AsyncLedger.open(pg_url) as ledger,
        await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn,
    ):
        await ledger.define("t")
        with pytest.raises(InvalidRequestError, match="autocommit"):
            ledger.using(conn)
        async with conn.transaction():
            job_id = (await ledger.using(conn).enqueue("t")).job_id
        assert job_id is not None and await ledger.get(job_id) is not None


@pytest.mark.postgres
async def test_postgres_the_joined_ledger_called_from_the_loop_is_refused(pg_url: str) -> None:
    """Calling the joined sync ledger from the loop's own thread would wait for the loop it
    blocks: refused with a hint, not a hang."""
    async with (
        await AsyncLedger.open(pg_url) as ledger,
        await psycopg.AsyncConnection.connect(pg_url) as conn,
    ):
        await ledger.define("t")
        tx = ledger.using(conn)
        with pytest.raises(InvalidRequestError, match="event loop"):
            tx.ledger.enqueue("t")
        await conn.rollback()


@pytest.mark.postgres
async def test_postgres_a_sync_ledger_refuses_an_async_connection(pg_url: str) -> None:
    """``Ledger.using`` with an AsyncConnection names the async entry point."""
    with Ledger.open(pg_url) as ledger:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            with pytest.raises(InvalidRequestError, match=r"AsyncLedger\.using"):
                ledger.using(conn)


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_postgres_concurrent_calls_on_one_connection_take_turns(
    pg_url: str, kind: str
) -> None:
    """20 enqueues gathered on one application transaction, every other one refused (an
    unknown type): they run one after another on its connection (an AsyncConnection, or a
    sync one the async ledger's threads share), so each refusal rolls back only its own
    savepoint and the 10 others commit together."""
    async with await AsyncLedger.open(pg_url) as ledger:
        await ledger.define("t")
        conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]
        if kind == "async":
            conn = await psycopg.AsyncConnection.connect(pg_url)
        else:
            conn = await asyncio.to_thread(psycopg.connect, pg_url)
        try:
            tx = ledger.using(conn)
            found = await asyncio.gather(
                *(tx.enqueue("t" if i % 2 else "none", {"i": i}) for i in range(20)),
                return_exceptions=True,
            )
            if isinstance(conn, psycopg.AsyncConnection):
                await conn.commit()
            else:
                await asyncio.to_thread(conn.commit)
        finally:
            if isinstance(conn, psycopg.AsyncConnection):
                await conn.close()
            else:
                conn.close()
        refused = [r for r in found[0::2]]
        assert all(isinstance(r, DefinitionNotFoundError) for r in refused), refused
        ids = [r.job_id for r in found[1::2] if isinstance(r, Enqueued)]
        assert len(set(ids)) == 10
        assert len(await ledger.get_many(ids)) == 10


async def test_sqlite_an_async_ledger_joins_a_sqlite3_transaction(sqlite_url: str) -> None:
    """SQLite: ``AsyncLedger.using`` takes the application's sqlite3 connection (opened with
    ``check_same_thread=False``: the ledger's threads run the statements); the job commits
    with the application's transaction, or is gone with its rollback."""
    import sqlite3

    from ledger.store.config import sqlite_path

    async with await AsyncLedger.open(sqlite_url) as ledger:
        await ledger.define("t")
        conn = sqlite3.connect(
            sqlite_path(sqlite_url), isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("BEGIN IMMEDIATE")
            dropped = (await ledger.using(conn).enqueue("t")).job_id
            conn.rollback()
            conn.execute("BEGIN IMMEDIATE")
            kept = (await ledger.using(conn).enqueue("t")).job_id
            conn.commit()
        finally:
            conn.close()
        assert dropped is not None and await ledger.get(dropped) is None
        assert kept is not None and await ledger.get(kept) is not None
