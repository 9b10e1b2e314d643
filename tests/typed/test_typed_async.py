"""Typed jobs enqueued from asyncio code (``enqueue_async``, ``enqueue_many_async``): through
an AsyncLedger on both backends, and inside the application's AsyncConnection transaction on
PostgreSQL, the payload validated in the loop before anything is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import msgspec
import psycopg
import pytest

from ledger import (
    AsyncLedger,
    InvalidRequestError,
    JobContext,
    JobStatus,
    KeywordJob,
    Registry,
    SyncJobContext,
    TypedJob,
)
from ledger.clock import FakeClock
from ledger.testing import drain


class Charge(msgspec.Struct, frozen=True):
    amount: int
    currency: str = "EUR"


class Declared(NamedTuple):
    registry: Registry
    charge: TypedJob[Charge, int]
    refund: KeywordJob[Any, str]


def declared(seen: list[Any]) -> Declared:
    """``card.charge`` (a Struct payload, async handler) and ``card.refund`` (keyword
    parameters, sync handler), each recording what it was given."""
    registry = Registry()

    @registry.job("card.charge", max_attempts=4)
    async def charge(ctx: JobContext, payload: Charge) -> int:
        seen.append(payload)
        return payload.amount

    @registry.job("card.refund")
    def refund(ctx: SyncJobContext, *, order: int, reason: str = "asked") -> str:
        seen.append((order, reason))
        return f"refunded {order}"

    return Declared(registry, charge, refund)


@pytest.fixture
async def async_ledger(db_url: str, clock: FakeClock) -> AsyncIterator[AsyncLedger]:
    opened = await AsyncLedger.open(db_url, clock=clock)
    yield opened
    await opened.close()


async def test_both_kinds_of_typed_job_enqueue_through_an_async_ledger(
    async_ledger: AsyncLedger,
) -> None:
    """Each kind enqueues from the loop; the declaration defines its type on the first
    enqueue (max_attempts from the decorator); a repeated idempotency key answers the
    existing job; the many-form writes one job per payload; the handlers then get the
    decoded payloads and the callers the outputs."""
    seen: list[Any] = []
    jobs = declared(seen)
    first = await jobs.charge.enqueue_async(async_ledger, Charge(500), idempotency_key="o-1")
    again = await jobs.charge.enqueue_async(async_ledger, Charge(500), idempotency_key="o-1")
    assert first.outcome == "created" and again.outcome == "existing"
    assert again.job_id == first.job_id
    many = await jobs.charge.enqueue_many_async(async_ledger, [Charge(1), Charge(2, "USD")])
    refund = await jobs.refund.enqueue_async(async_ledger, order=7)
    refunds = await jobs.refund.enqueue_many_async(async_ledger, [{"order": 8, "reason": "late"}])
    outcomes = [job.outcome for job in many] + [job.outcome for job in [refund, *refunds]]
    assert outcomes == ["created"] * 4
    definition = async_ledger.ledger.definition("card.charge")
    assert definition is not None and definition.max_attempts == 4
    state = await async_ledger.get(first.job_id)
    assert state is not None and state.payload == {"amount": 500, "currency": "EUR"}

    assert (await drain(async_ledger.ledger, jobs.registry)).succeeded == 5
    assert sorted(map(repr, seen)) == sorted(
        map(repr, [Charge(500), Charge(1), Charge(2, "USD"), (7, "asked"), (8, "late")])
    )
    assert await async_ledger.run(first.output) == 500
    assert await async_ledger.run(refund.output) == "refunded 7"


async def test_a_wrong_payload_raises_in_the_loop_and_writes_nothing(
    async_ledger: AsyncLedger,
) -> None:
    """A payload msgspec rejects is request.invalid at the await, for either kind and in a
    batch: no job, no definition, not one event (the head does not move)."""
    jobs = declared([])
    before = await async_ledger.run(async_ledger.ledger.store.head_position)
    with pytest.raises(InvalidRequestError, match=r"payload of 'card\.charge'.*\$\.amount"):
        await jobs.charge.enqueue_async(async_ledger, Charge(amount="5"))  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"payload of 'card\.charge'"):
        await jobs.charge.enqueue_many_async(async_ledger, [Charge(1), {"amount": None}])  # type: ignore[list-item]
    with pytest.raises(InvalidRequestError, match=r"payload of 'card\.refund'"):
        await jobs.refund.enqueue_async(async_ledger, order="seven")
    assert await async_ledger.run(async_ledger.ledger.store.head_position) == before
    assert await async_ledger.run(async_ledger.ledger.counts) == {}


@pytest.mark.postgres
async def test_postgres_a_typed_job_in_the_applications_async_transaction(pg_url: str) -> None:
    """Inside the application's AsyncConnection transaction: a rollback leaves neither the
    job nor the definition its first enqueue wrote; a commit keeps both with the
    application's row; meanwhile the loop keeps running (a ticker task advances)."""
    jobs = declared([])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with await AsyncLedger.open(pg_url) as ledger:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await conn.execute("CREATE TABLE orders (id int)")
            await conn.commit()
            ticking = asyncio.create_task(ticker())
            await conn.execute("INSERT INTO orders VALUES (1)")
            dropped = await jobs.charge.enqueue_async(ledger.using(conn), Charge(100))
            await conn.rollback()
            assert await ledger.get(dropped.job_id) is None
            assert await ledger.run(lambda: ledger.ledger.definition("card.charge")) is None

            await conn.execute("INSERT INTO orders VALUES (2)")
            before_ticks = ticks
            kept = await jobs.charge.enqueue_async(ledger.using(conn), Charge(200))
            assert ticks > before_ticks  # the loop ran while the enqueue was in a thread
            await conn.commit()
            ticking.cancel()
            rows = await (await conn.execute("SELECT id FROM orders")).fetchall()
        assert rows == [(2,)]
        state = await ledger.get(kept.job_id)
        assert state is not None and state.status is JobStatus.PENDING
        assert await ledger.run(lambda: ledger.ledger.definition("card.charge")) is not None
        report = await ledger.run(lambda: ledger.ledger.projections().verify())
        assert report.clean, report
