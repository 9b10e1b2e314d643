"""A FastAPI app that takes orders: ``POST /orders`` writes the order's row and enqueues its
typed ``orders.ship`` job in one transaction of the app's own connection, so there is an order
with its job or neither; ``GET /jobs/{job_id}`` answers the job's state through the async API
(docs/transactions.md, "In a FastAPI app"; tests/examples/test_fastapi_shop.py runs it).

    export JOBLEDGER_DB=postgresql://postgres@127.0.0.1:5432/shop   # or sqlite:///shop.db
    jobledger init
    uvicorn --app-dir examples fastapi_shop:create_app --factory      # the web app
    cd examples && jobledger worker --app fastapi_shop:registry      # a worker beside it

On PostgreSQL each request has its own ``psycopg.AsyncConnection``; on SQLite a ``sqlite3``
connection whose statements run in the async ledger's threads, so neither blocks the loop.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import AsyncIterator
from typing import Any, Protocol
from uuid import UUID

import msgspec
import psycopg
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel

from ledger import AsyncLedger, JobContext, JobNotFoundError, Registry

registry = Registry()


class Ship(msgspec.Struct):
    order_id: int
    total: int  # cents


class Shipped(msgspec.Struct):
    order_id: int
    parcel: str


@registry.job("orders.ship", max_attempts=3)
async def ship(ctx: JobContext, order: Ship) -> Shipped:
    return Shipped(order_id=order.order_id, parcel=f"parcel-{order.order_id}")


class OrderIn(BaseModel):
    total: int
    # A stand-in for whatever can go wrong after the enqueue (a failed check, a bug): the
    # request raises, the transaction rolls back, and the job goes with the order.
    fail_after_enqueue: bool = False


class OrderOut(BaseModel):
    order_id: int
    job_id: UUID


class JobOut(BaseModel):
    job_id: UUID
    status: str
    output: Any = None


class Orders(Protocol):
    """The app's own writes, in the request's transaction."""

    async def insert(self, total: int) -> int: ...


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_file(url: str) -> str:
    return url.removeprefix("sqlite:///")


class PostgresOrders:
    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self.connection = connection

    async def insert(self, total: int) -> int:
        cursor = await self.connection.execute(
            "INSERT INTO orders (total) VALUES (%s) RETURNING id", (total,)
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


class SqliteOrders:
    def __init__(self, connection: sqlite3.Connection, jobs: AsyncLedger) -> None:
        self.connection = connection
        self.jobs = jobs

    async def insert(self, total: int) -> int:
        def insert() -> int:
            cursor = self.connection.execute("INSERT INTO orders (total) VALUES (?)", (total,))
            assert cursor.lastrowid is not None
            return cursor.lastrowid

        return await self.jobs.run(insert)


def transaction(
    url: str, jobs: AsyncLedger
) -> contextlib.AbstractAsyncContextManager[tuple[object, Orders]]:
    """A connection of the request's own, in a transaction committed when the block ends and
    rolled back when it raises: the connection (for ``jobs.using``) and the orders on it."""
    return postgres_transaction(url) if is_postgres(url) else sqlite_transaction(url, jobs)


@contextlib.asynccontextmanager
async def postgres_transaction(url: str) -> AsyncIterator[tuple[object, Orders]]:
    # psycopg's connection block commits at its end, or rolls back on an exception.
    async with await psycopg.AsyncConnection.connect(url) as connection:
        yield connection, PostgresOrders(connection)


@contextlib.asynccontextmanager
async def sqlite_transaction(url: str, jobs: AsyncLedger) -> AsyncIterator[tuple[object, Orders]]:
    # check_same_thread=False: the async ledger runs the statements in its own threads, where
    # waiting for SQLite's write lock does not hold up the loop.
    connection = sqlite3.connect(sqlite_file(url), isolation_level=None, check_same_thread=False)
    try:
        await jobs.run(functools.partial(connection.execute, "BEGIN IMMEDIATE"))
        try:
            yield connection, SqliteOrders(connection, jobs)
        except BaseException:
            await jobs.run(connection.rollback)
            raise
        await jobs.run(connection.commit)
    finally:
        await jobs.run(connection.close)


async def create_orders_table(url: str) -> None:
    if is_postgres(url):
        async with await psycopg.AsyncConnection.connect(url) as connection:
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, total integer NOT NULL)"
            )
        return
    with contextlib.closing(sqlite3.connect(sqlite_file(url), isolation_level=None)) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)"
        )


def create_app(url: str | None = None) -> FastAPI:
    """The app on the ledger at ``url`` (default: ``$JOBLEDGER_DB``), which holds the orders
    table too: one database, so one transaction covers the order and its job."""
    ledger_url = url or os.environ["JOBLEDGER_DB"]

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with await AsyncLedger.open(ledger_url) as jobs:
            await create_orders_table(ledger_url)
            app.state.jobs = jobs
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders", status_code=201)
    async def place_order(order: OrderIn, request: Request) -> OrderOut:
        jobs: AsyncLedger = request.app.state.jobs
        async with transaction(ledger_url, jobs) as (connection, orders):
            order_id = await orders.insert(order.total)
            enqueued = await ship.enqueue_async(jobs.using(connection), Ship(order_id, order.total))
            if order.fail_after_enqueue:
                raise HTTPException(status_code=503, detail="the order could not be placed")
        return OrderOut(order_id=order_id, job_id=enqueued.job_id)

    @app.get("/jobs/{job_id}")
    async def job_state(job_id: UUID, request: Request, wait: float = 0) -> JobOut:
        """The job's state; with ``?wait=SECONDS``, once it has ended or that long has passed."""
        jobs: AsyncLedger = request.app.state.jobs
        try:
            state = await jobs.wait(job_id, wait) if wait > 0 else await jobs.get(job_id)
        except JobNotFoundError:
            state = None
        if state is None:
            raise HTTPException(status_code=404, detail=f"no job {job_id}")
        return JobOut(job_id=job_id, status=state.status.value, output=state.output)

    return app
