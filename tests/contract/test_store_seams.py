"""The store's seams: the id adapters, the read snapshot, the LISTEN facility, error mapping."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
from uuid import UUID, uuid4

import psycopg
import pytest

from ledger import Ledger
from ledger.core.errors import LedgerError
from ledger.store.follow import ListeningWaiter, PollingWaiter, event_waiter
from ledger.store.ids import PostgresIds, SQLiteIds, id_adapter
from ledger.store.listeners import ListenerBus
from ledger.store.notifications import Topic
from ledger.store.postgres.listener import ThreadListening
from ledger.store.streams import job_type_stream_id

JOB = UUID("0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11")


def test_sqlite_ids_are_hex_text_and_lists_json() -> None:
    """SQLite's adapter stores ids as 32-hex text, binds lists as JSON, and reads ids back."""
    ids = SQLiteIds()
    assert ids.key(JOB) == JOB.hex
    assert json.loads(ids.keys([JOB, JOB])) == [JOB.hex, JOB.hex]
    assert json.loads(ids.values(["a", "b"])) == ["a", "b"]
    assert ids.uuid(JOB.hex) == JOB
    assert ids.stored_params({"job_id": JOB, "n": 1}) == {"job_id": JOB.hex, "n": 1}


def test_postgres_ids_are_uuids_and_lists_arrays() -> None:
    """PostgreSQL's adapter passes ids and lists as they are (psycopg adapts them)."""
    ids = PostgresIds()
    assert ids.key(JOB) is JOB
    assert ids.keys((JOB,)) == [JOB]
    assert ids.values(("a",)) == ["a"]
    assert ids.uuid(JOB) is JOB
    assert ids.stored_params({"job_id": JOB}) == {"job_id": JOB}
    assert id_adapter("postgres").backend == "postgres"
    assert id_adapter("sqlite").backend == "sqlite"


def test_a_store_spells_ids_with_its_backends_adapter(db_url: str) -> None:
    """Each store's ``ids`` is its backend's adapter, and the ids it reads back are UUIDs."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        job_id = ledger.enqueue("t").job_id
        assert job_id is not None
        store = ledger.store
        assert store.ids is id_adapter(store.backend)
        [row] = store.read("queue_get_many", {"job_ids": store.ids.keys([job_id])})
        assert store.ids.uuid(row["job_id"]) == job_id


def test_a_snapshot_reads_histories_as_the_recorder_does(db_url: str) -> None:
    """``ReadSnapshot.histories`` gives each stream's records in order, the same as
    ``Store.history``, and an empty list for a stream with no events."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        job_id = ledger.enqueue("t").job_id
        assert job_id is not None
        ledger.cancel(job_id)
        unknown = uuid4()
        definitions = job_type_stream_id("t")
        with ledger.store.read_snapshot() as snapshot:
            found = snapshot.histories([job_id, unknown, definitions])
        assert found[job_id] == ledger.store.history(job_id)
        assert [r.originator_version for r in found[job_id]] == [1, 2]
        assert found[definitions] == ledger.store.history(definitions)
        assert found[unknown] == []


def test_the_store_says_whether_it_has_notifications(db_url: str) -> None:
    """PostgreSQL has notifications (the follower listens); SQLite has none (it polls, and
    asking it to listen is refused)."""
    with Ledger.open(db_url) as ledger:
        store = ledger.store
        waiter = event_waiter(store)
        try:
            if store.backend == "postgres":
                assert store.has_notifications
                assert isinstance(waiter, ListeningWaiter)
            else:
                assert not store.has_notifications
                assert isinstance(waiter, PollingWaiter)
                with pytest.raises(NotImplementedError):
                    store.listen(Topic.EVENTS_APPENDED, lambda: None)
        finally:
            waiter.close()


def test_the_sync_face_hears_every_append(pg_url: str) -> None:
    """``Store.listen(EVENTS_APPENDED)`` calls back from its thread once on connecting and
    again when another connection appends; after ``close`` its thread has ended."""
    heard = threading.Event()
    with Ledger.open(pg_url) as ledger:
        listening = ledger.store.listen(Topic.EVENTS_APPENDED, heard.set)
        try:
            assert heard.wait(5.0)  # the look after connecting
            heard.clear()
            with Ledger.open(pg_url) as other:
                other.define("t")
            assert heard.wait(5.0)
        finally:
            listening.close()
        assert isinstance(listening, ThreadListening)
        assert not listening._thread.is_alive()


async def test_the_async_face_hears_jobs_available(pg_url: str) -> None:
    """``Store.listen_async(JOBS_AVAILABLE)`` sets a flag in the running loop when another
    connection enqueues, and not for a commit that makes nothing claimable."""
    heard = asyncio.Event()
    ledger = await asyncio.to_thread(Ledger.open, pg_url)
    try:
        listening = await ledger.store.listen_async(Topic.JOBS_AVAILABLE, heard.set)
        try:
            await asyncio.wait_for(heard.wait(), 5.0)  # the look after connecting
            heard.clear()
            await asyncio.to_thread(ledger.define, "t")
            await asyncio.sleep(0.3)
            assert not heard.is_set()  # a definition makes no job claimable
            await asyncio.to_thread(ledger.enqueue, "t")
            await asyncio.wait_for(heard.wait(), 5.0)
        finally:
            await listening.close()
    finally:
        await asyncio.to_thread(ledger.close)


def test_a_listener_that_cannot_connect_says_so_and_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused listening connection is logged (callers poll meanwhile) and neither
    starting nor closing the listener hangs."""
    with caplog.at_level(logging.WARNING, logger="jobledger.listen"):
        listening = ThreadListening(
            "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1",
            Topic.EVENTS_APPENDED,
            lambda: None,
        )
        listening.close()
    assert not listening._thread.is_alive()
    assert any("LISTEN jl_events failed" in r.getMessage() for r in caplog.records)


def test_no_driver_error_leaves_the_store(db_url: str) -> None:
    """A database error under the eventsourcing recorder (its events table dropped by hand)
    comes out of the store as a LedgerError, never a driver or eventsourcing error: the CLI
    needs no driver import to report it."""
    with Ledger.open(db_url) as ledger:
        if ledger.store.backend == "postgres":
            with psycopg.connect(db_url, autocommit=True) as conn:
                conn.execute("DROP TABLE jl_events CASCADE")
        else:
            path = db_url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as conn:
                conn.execute("DROP TABLE jl_events")
        for read in (lambda: ledger.store.history(JOB), ledger.store.head_position):
            with pytest.raises(LedgerError):
                read()


def test_the_listener_bus_calls_what_is_registered() -> None:
    """Listeners are called in order on each notify; a removed one is not, and removing an
    unknown one is harmless."""
    calls: list[str] = []
    bus = ListenerBus()

    def first() -> None:
        calls.append("first")

    def second() -> None:
        calls.append("second")

    bus.add(first)
    bus.add(second)
    bus.notify()
    bus.remove(first)
    bus.remove(first)
    bus.notify()
    assert calls == ["first", "second", "second"]
