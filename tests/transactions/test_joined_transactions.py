"""Transactional enqueue: ``Ledger.using(conn)`` writes in the application's transaction.

Both backends, with real connections of the application's own: the job exists if and only if
the application commits, its events and view rows with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from app_connections import AppConnection

from ledger import (
    DatabaseBusyError,
    DefinitionNotFoundError,
    InvalidRequestError,
    JobStatus,
    Ledger,
)


@pytest.fixture
def app(db_url: str, defined: Ledger) -> Iterator[AppConnection]:
    """The application's connection to the ledger's database (job type 't' defined)."""
    opened = AppConnection(db_url)
    yield opened
    opened.close()


def _clean(ledger: Ledger) -> None:
    report = ledger.projections().verify()
    assert report.clean, report
    assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []


def test_a_committed_job_exists_is_claimable_and_verifies(
    defined: Ledger, app: AppConnection
) -> None:
    """After the application commits, the job is there, claimable, and every view verifies."""
    app.begin()
    job_id = defined.using(app.conn).enqueue("t", {"n": 1}).job_id
    assert job_id is not None
    assert defined.get(job_id) is None  # not before the commit, to anyone else
    app.commit()
    state = defined.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert [job.job_id for job in defined.claim("w")] == [job_id]
    _clean(defined)


def test_a_rolled_back_job_leaves_no_event_and_no_row(defined: Ledger, app: AppConnection) -> None:
    """Rolled back: no event was appended, no view row written, nothing to claim."""
    head = defined.store.head_position()
    app.begin()
    job_id = defined.using(app.conn).enqueue("t", idempotency_key="k").job_id
    assert job_id is not None
    app.rollback()
    assert defined.store.head_position() == head
    assert defined.get(job_id) is None
    assert defined.history(job_id) == []
    assert defined.claim("w") == []
    assert defined.enqueue("t", idempotency_key="k").job_id != job_id  # the key was never taken
    _clean(defined)


def test_the_application_sees_its_own_uncommitted_job(defined: Ledger, app: AppConnection) -> None:
    """Reads through the joined ledger run in the transaction: they see the job before the
    commit; the ledger's own reads do not."""
    app.begin()
    tx = defined.using(app.conn)
    job_id = tx.enqueue("t").job_id
    assert job_id is not None
    state = tx.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert defined.get(job_id) is None
    app.rollback()


def test_the_applications_write_and_the_job_commit_or_vanish_together(
    defined: Ledger, app: AppConnection
) -> None:
    """The order row and its job: both after a commit, neither after a rollback."""
    app.begin()
    app.execute("INSERT INTO orders (item) VALUES (?)", ("lost",))
    lost = defined.using(app.conn).enqueue("t", {"order": "lost"}).job_id
    app.rollback()
    app.begin()
    app.execute("INSERT INTO orders (item) VALUES (?)", ("kept",))
    kept = defined.using(app.conn).enqueue("t", {"order": "kept"}).job_id
    app.commit()
    assert app.orders() == ["kept"]
    assert lost is not None and defined.get(lost) is None
    state = defined.get(kept) if kept is not None else None
    assert state is not None and state.request.payload == {"order": "kept"}


def test_a_savepoint_the_application_rolls_back_takes_only_its_job(
    defined: Ledger, app: AppConnection
) -> None:
    """A job enqueued inside the application's rolled-back savepoint is gone; one enqueued
    before it in the same transaction commits."""
    app.begin()
    tx = defined.using(app.conn)
    kept = tx.enqueue("t", {"n": 1}).job_id
    with pytest.raises(RuntimeError), app.savepoint():
        dropped = tx.enqueue("t", {"n": 2}).job_id
        raise RuntimeError("the application changes its mind")
    app.commit()
    assert kept is not None and defined.get(kept) is not None
    assert defined.get(dropped) is None  # type: ignore[arg-type]
    assert [job.job_id for job in defined.claim("w", limit=5)] == [kept]
    _clean(defined)


def test_a_refused_enqueue_leaves_the_applications_transaction_usable(
    defined: Ledger, app: AppConnection
) -> None:
    """An enqueue the ledger refuses (an unknown type) rolls back only its own savepoint: the
    application's write before it, and a job after it, still commit."""
    app.begin()
    app.execute("INSERT INTO orders (item) VALUES (?)", ("before",))
    tx = defined.using(app.conn)
    with pytest.raises(DefinitionNotFoundError):
        tx.enqueue("no.such.type")
    job_id = tx.enqueue("t").job_id
    app.commit()
    assert app.orders() == ["before"]
    assert job_id is not None and defined.get(job_id) is not None


def test_no_listener_of_this_process_is_woken_by_a_joined_enqueue(
    defined: Ledger, app: AppConnection
) -> None:
    """The in-process wake-up fires at our own commits only: a joined enqueue, committed or
    rolled back by the application, calls none (other processes learn of the commit from the
    database: NOTIFY at commit, or their poll)."""
    woken: list[None] = []
    defined.store.add_listener(lambda: woken.append(None))
    app.begin()
    defined.using(app.conn).enqueue("t")
    app.rollback()
    app.begin()
    defined.using(app.conn).enqueue("t")
    app.commit()
    assert woken == []
    defined.enqueue("t")
    assert woken == [None]  # the listener is live: our own commit calls it


def test_a_joined_ledger_closes_neither_the_connection_nor_the_ledger(
    defined: Ledger, app: AppConnection
) -> None:
    """``with ledger.using(conn) as tx:`` ends with both still open."""
    app.begin()
    with defined.using(app.conn) as tx:
        job_id = tx.enqueue("t").job_id
    app.commit()
    assert job_id is not None and defined.get(job_id) is not None
    assert app.orders() == []


def test_a_connection_outside_a_transaction_is_refused(defined: Ledger, db_url: str) -> None:
    """An autocommit PostgreSQL connection outside ``conn.transaction()``, or a SQLite one
    with no BEGIN, would commit the job at once: refused."""
    import sqlite3

    import psycopg

    from ledger.store.config import sqlite_path

    conn: psycopg.Connection[object] | sqlite3.Connection
    if db_url.startswith("postgres"):
        conn = psycopg.connect(db_url, autocommit=True)
    else:
        conn = sqlite3.connect(sqlite_path(db_url), isolation_level=None)
    with conn, pytest.raises(InvalidRequestError, match="transaction"):
        defined.using(conn)


def test_a_closed_connection_is_refused(defined: Ledger, app: AppConnection) -> None:
    """A closed connection is a clear ``request.invalid``, at ``using`` and at use."""
    app.begin()
    tx = defined.using(app.conn)
    app.close()
    with pytest.raises(InvalidRequestError, match="closed"):
        tx.enqueue("t")
    with pytest.raises(InvalidRequestError, match="closed"):
        defined.using(app.conn)


def test_a_connection_of_another_kind_is_refused(defined: Ledger) -> None:
    """Neither a connection of the other backend's driver nor any other object is joined."""
    import sqlite3

    other = sqlite3.connect(":memory:")
    with pytest.raises(InvalidRequestError):
        defined.using(other)
    with pytest.raises(InvalidRequestError):
        defined.using(object())


def test_a_connection_to_another_database_is_refused(
    defined: Ledger, db_url: str, request: pytest.FixtureRequest
) -> None:
    """A connection to another database (PostgreSQL: another ledger's; SQLite: another
    file) is refused before anything is written."""
    if db_url.startswith("postgres"):
        other_url = request.getfixturevalue("empty_pg_url")
    else:
        other_url = f"sqlite:///{request.getfixturevalue('tmp_path')}/other.db"
    other = AppConnection(other_url)
    try:
        other.begin()
        with pytest.raises(InvalidRequestError, match="the connection is to"):
            defined.using(other.conn)
    finally:
        other.close()


def test_a_failed_postgres_transaction_is_refused(pg_url: str) -> None:
    """PostgreSQL (SQLite has no aborted-transaction state): a transaction a failed
    statement aborted cannot take a job."""
    import psycopg

    with Ledger.open(pg_url) as ledger:
        app = AppConnection(pg_url)
        try:
            with pytest.raises(psycopg.errors.UndefinedTable):
                app.execute("SELECT * FROM no_such_table")
            with pytest.raises(InvalidRequestError, match="failed"):
                ledger.using(app.conn)
            app.rollback()
        finally:
            app.close()


@pytest.mark.postgres
def test_postgres_lock_timeout_of_the_application_is_kept(pg_url: str) -> None:
    """The events-table lock's ``SET LOCAL lock_timeout`` (a keyed enqueue) does not change
    the application's own setting for the rest of its transaction."""
    with Ledger.open(pg_url) as ledger:
        ledger.define("t")
        app = AppConnection(pg_url)
        try:
            app.execute("SET LOCAL lock_timeout = '7s'")
            ledger.using(app.conn).enqueue("t", idempotency_key="locks")
            assert app.execute("SHOW lock_timeout") == [("7s",)]
            app.rollback()
        finally:
            app.close()


@pytest.mark.postgres
def test_postgres_a_rolled_back_enqueue_sends_no_notification(pg_url: str) -> None:
    """NOTIFY in the application's transaction is dropped with it: a worker's LISTEN hears
    only the marker sent after the rollback, never a wake-up for the phantom job; a
    committed enqueue is heard."""
    import psycopg

    with Ledger.open(pg_url) as ledger, psycopg.connect(pg_url, autocommit=True) as listener:
        ledger.define("t")
        listener.execute("LISTEN jl_jobs_available")
        app = AppConnection(pg_url)
        try:
            ledger.using(app.conn).enqueue("t")
            app.rollback()
            listener.execute("NOTIFY jl_jobs_available, 'marker'")
            first = next(listener.notifies(timeout=10, stop_after=1))
            assert first.payload == "marker"
            ledger.using(app.conn).enqueue("t")
            app.commit()
            heard = next(listener.notifies(timeout=10, stop_after=1))
            assert heard.channel == "jl_jobs_available" and heard.payload == ""
        finally:
            app.close()


def test_sqlite_a_stale_deferred_transaction_is_refused_at_once(sqlite_url: str) -> None:
    """SQLite: a deferred transaction whose snapshot another writer has passed cannot take
    the write lock; that is ``store.busy`` at once (no deadlock, no wait for a busy
    timeout), and the application's transaction can still roll back."""
    import sqlite3
    import threading

    from ledger.store.config import sqlite_path

    with Ledger.open(sqlite_url) as ledger:
        ledger.define("t")
        conn = sqlite3.connect(
            sqlite_path(sqlite_url), isolation_level=None, timeout=60, check_same_thread=False
        )
        try:
            conn.execute("BEGIN")  # deferred, as Python's default would begin it
            conn.execute("SELECT count(*) FROM jl_queue").fetchall()  # its snapshot
            ledger.enqueue("t")  # another writer commits past it
            done = threading.Event()
            errors: list[BaseException] = []

            def enqueue() -> None:
                try:
                    ledger.using(conn).enqueue("t")
                except BaseException as exc:
                    errors.append(exc)
                done.set()

            thread = threading.Thread(target=enqueue)
            thread.start()
            assert done.wait(10), "waited for the busy timeout (60 s): a stall, not a refusal"
            thread.join()
            assert len(errors) == 1 and isinstance(errors[0], DatabaseBusyError)
            conn.rollback()
        finally:
            conn.close()
