"""The PostgreSQL pool never hands out a dead connection, and the LISTEN loop reconnects.

Every test drops the ledger's connections on its own database (``pg_terminate_backend``
through an admin connection, waiting until the backends are gone) and then expects the very
next call to work: no caller meets the corpses the server left in the pool.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from pg_faults import POOLED, backends_of, drop_connections, fill_pool

from ledger import EnqueueRequest, FakeClock, Ledger
from ledger.api.ledger import Completion
from ledger.store.notifications import Topic
from ledger.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def test_checkout_after_the_server_dropped_the_pooled_connections_is_live(pg_url: str) -> None:
    """After every pooled connection was terminated, each checkout still returns a connection
    that runs a statement."""
    store = PostgresStore(pg_url, pool_size=2, max_overflow=8)
    try:
        fill_pool(store)
        assert drop_connections(pg_url) >= POOLED
        for _ in range(POOLED + 2):
            with store.datastore.get_connection() as conn:
                assert conn.execute("SELECT 1").fetchone() == {"?column?": 1}
    finally:
        store.close()


def test_reads_claims_heartbeats_and_completions_work_at_once_after_a_drop(pg_url: str) -> None:
    """The first read, claim, heartbeat and completion after a connection drop succeed: none
    fails on a dead pooled connection."""
    with Ledger.open(pg_url, clock=FakeClock(), pool_size=2) as ledger:
        assert isinstance(ledger.store, PostgresStore)
        ledger.define("t")
        ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(3)])
        fill_pool(ledger.store)
        drop_connections(pg_url)
        assert ledger.counts() == {"pending": 3}
        fill_pool(ledger.store)
        drop_connections(pg_url)
        jobs = ledger.claim("w", limit=3, types=["t"])
        leases = [job.lease for job in jobs if job.lease is not None]
        assert len(leases) == 3
        fill_pool(ledger.store)
        drop_connections(pg_url)
        assert len(ledger.heartbeat_many(leases).accepted) == 3
        fill_pool(ledger.store)
        drop_connections(pg_url)
        assert len(ledger.finish_many([Completion(lease) for lease in leases]).accepted) == 3
        assert ledger.counts() == {"succeeded": 3}


def test_a_read_whose_connection_drops_mid_statement_is_retried_once(pg_url: str) -> None:
    """A read-only query whose connection the server drops while it runs is run again on a
    fresh connection, and its rows come back."""
    store = PostgresStore(pg_url, pool_size=2)
    store.sql = {**store.sql, "test_slow_read": "SELECT 7 AS seven, pg_sleep(%(s)s) AS slept"}
    killed: list[int] = []

    def kill_the_first_sleeper() -> None:
        while not (pids := backends_of(pg_url, query_like="SELECT 7 AS seven%")):
            threading.Event().wait(0.01)
        killed.extend(pids)
        drop_connections(pg_url, pids=pids)

    killer = threading.Thread(target=kill_the_first_sleeper)
    try:
        killer.start()
        rows = store.read("test_slow_read", {"s": 0.5})
        killer.join()
        assert killed and rows[0]["seven"] == 7
    finally:
        killer.join()
        store.close()


@pytest.mark.parametrize("face", ["thread", "task"])
async def test_the_listen_loop_reconnects_after_its_connection_is_dropped(
    pg_url: str, face: str
) -> None:
    """The LISTEN connection, terminated by the server, comes back on its own and delivers
    the next notification."""
    store = PostgresStore(pg_url)
    loop = asyncio.get_running_loop()
    heard = asyncio.Event()

    def on_notify() -> None:
        loop.call_soon_threadsafe(heard.set) if face == "thread" else heard.set()

    listening = (
        store.listen(Topic.JOBS_AVAILABLE, on_notify)
        if face == "thread"
        else await store.listen_async(Topic.JOBS_AVAILABLE, on_notify)
    )
    try:
        [listener] = await asyncio.to_thread(backends_of, pg_url, query_like="LISTEN%")
        await asyncio.to_thread(drop_connections, pg_url, pids=[listener])
        while not (back := await asyncio.to_thread(backends_of, pg_url, query_like="LISTEN%")):
            await asyncio.sleep(0.05)
        assert back != [listener]
        heard.clear()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"NOTIFY {Topic.JOBS_AVAILABLE.value}")
        await asyncio.wait_for(heard.wait(), timeout=10)
    finally:
        close = listening.close()
        if close is not None:
            await close
        store.close()
