"""Defects found in review, pinned: typed input, canonical idempotency, lock order,
concurrent definitions, event order, error mapping."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import (
    ConcurrencyConflictError,
    DatabaseNotInitialisedError,
    EnqueueRequest,
    Failure,
    FailureKind,
    FakeClock,
    IdempotencyConflictError,
    InvalidRequestError,
    Ledger,
    Subject,
)
from ledger.core.errors import DatabaseBusyError, DatabaseUnusableError, StoreError
from ledger.core.events import JobEnqueued, JobTypeDefined
from ledger.store.postgres.errors import from_postgres
from ledger.store.sqlite.errors import from_sqlite


@pytest.mark.parametrize(
    "request_fields",
    [
        {"subject": Subject(source_id="s", uri="u", op="weird")},  # type: ignore[arg-type]
        {"max_attempts": 2.5},
        {"priority": True},
        {"timeout_s": "10"},
        {"org": 7},
    ],
)
def test_wrongly_typed_fields_are_refused_and_nothing_is_stored(
    defined: Ledger, request_fields: dict[str, object]
) -> None:
    """A value of the wrong type never reaches the store (it could not be read back)."""
    before = defined.store.head_position()
    with pytest.raises(InvalidRequestError):
        defined.enqueue_many([EnqueueRequest(job_type="t", **request_fields)])  # type: ignore[arg-type]
    assert defined.store.head_position() == before
    assert defined.claim("w") == []


def test_wrongly_typed_definitions_are_refused(ledger: Ledger) -> None:
    """define(max_attempts=2.5) is a bad request, not a poisoned job type."""
    with pytest.raises(InvalidRequestError):
        ledger.define("t", max_attempts=2.5)  # type: ignore[arg-type]
    assert ledger.definitions() == []


def test_idempotent_repeats_compare_canonical_json(defined: Ledger) -> None:
    """Key order and tuple-vs-list do not matter; 1 and 1.0 are different requests."""
    first = defined.enqueue("t", {"a": 1, "b": (1, 2)}, idempotency_key="k").job_id
    assert defined.enqueue("t", {"b": [1, 2], "a": 1}, idempotency_key="k").job_id == first
    with pytest.raises(IdempotencyConflictError):
        defined.enqueue("t", {"a": 1.0, "b": [1, 2]}, idempotency_key="k")
    assert first is not None
    state = defined.get(first)
    assert state is not None and state.payload == {"a": 1, "b": [1, 2]}


def test_enqueue_takes_no_row_lock_on_an_existing_job(pg_url: str) -> None:
    """With a worker write holding a job's row, an idempotent repeat of that job still
    returns at once: enqueue never waits on a row after taking the events-table lock, the
    order that deadlocked against worker writes."""
    with Ledger.open(pg_url) as ledger:
        ledger.define("t")
        job_id = ledger.enqueue("t", {"x": 1}, idempotency_key="k").job_id
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT 1 FROM jl_queue WHERE job_id = %s FOR UPDATE", (job_id,))
            result: list[object] = []
            thread = threading.Thread(
                target=lambda: result.append(
                    ledger.enqueue("t", {"x": 1}, idempotency_key="k").job_id
                )
            )
            thread.start()
            thread.join(timeout=10)
            holder.rollback()
        assert not thread.is_alive() and result == [job_id]


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_concurrent_definitions_of_one_type_record_it_once(
    backend: str, request: pytest.FixtureRequest, clock: FakeClock
) -> None:
    """Ten processes' worth of define("t") at once: one job_type_defined, no errors."""
    url = str(request.getfixturevalue("pg_url" if backend == "postgres" else "sqlite_url"))
    ledgers = [Ledger.open(url, clock=clock, pool_size=1) for _ in range(10)]
    barrier = threading.Barrier(10)
    errors: list[BaseException] = []

    def define(ledger: Ledger) -> None:
        try:
            barrier.wait(timeout=10)
            ledger.define("t", max_attempts=3)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=define, args=(opened,)) for opened in ledgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    try:
        assert errors == []
        from ledger.store.streams import job_type_stream_id

        history = ledgers[0].store.history(job_type_stream_id("t"))
        assert [type(r.event) for r in history] == [JobTypeDefined]
    finally:
        for opened in ledgers:
            opened.close()


def test_auto_defined_types_are_recorded_before_their_jobs(db_url: str) -> None:
    """job_type_defined precedes the job_enqueued that needed it in the notification log."""
    with Ledger.open(db_url, auto_define=True) as ledger:
        ledger.enqueue("fresh")
        notifications = ledger.store.recorder.select_notifications(start=1, limit=10)
        topics = [n.topic for n in notifications]
    assert topics == ["job_type_defined.v1", "job_enqueued.v2"]
    assert JobEnqueued.name == "job_enqueued"


def test_opening_a_missing_sqlite_file_leaves_no_file_behind(tmp_path: Path) -> None:
    """Refusing to open must not create an empty database file."""
    path = tmp_path / "absent.db"
    with pytest.raises(DatabaseNotInitialisedError):
        Ledger.open(str(path))
    assert not path.exists()


def test_init_adds_tables_missing_from_a_marked_database(tmp_path: Path) -> None:
    """A database of this schema version lacking a view table is refused on open and
    completed by init."""
    path = tmp_path / "l.db"
    Ledger.open(str(path), create=True).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE jl_dead_letters")
    with pytest.raises(DatabaseNotInitialisedError, match="jl_dead_letters"):
        Ledger.open(str(path))
    with Ledger.open(str(path), create=True) as ledger:
        assert ledger.created is True  # it had to add a table
        assert ledger.dead_letters() == []
    with Ledger.open(str(path), create=True) as ledger:
        assert ledger.created is False


def test_postgres_errors_are_mapped_by_sqlstate() -> None:
    """Deadlocks and unique violations are conflicts; lock timeouts are busy; connection
    failures make the database unusable; anything else keeps its SQLSTATE."""
    assert isinstance(
        from_postgres(psycopg.errors.DeadlockDetected("d"), "db"), ConcurrencyConflictError
    )
    assert isinstance(
        from_postgres(psycopg.errors.UniqueViolation("u"), "db"), ConcurrencyConflictError
    )
    busy = from_postgres(psycopg.errors.LockNotAvailable("l"), "db")
    assert isinstance(busy, DatabaseBusyError) and busy.sqlstate == "55P03"
    assert isinstance(
        from_postgres(psycopg.OperationalError("refused"), "db"), DatabaseUnusableError
    )
    assert isinstance(
        from_postgres(psycopg.errors.InsufficientPrivilege("p"), "db"), DatabaseUnusableError
    )
    other = from_postgres(psycopg.errors.DivisionByZero("z"), "db")
    assert isinstance(other, StoreError) and other.sqlstate == "22012"


def test_sqlite_errors_are_mapped_by_result_code(tmp_path: Path) -> None:
    """Real SQLite errors: a constraint is a conflict, a locked database is busy."""
    conn = sqlite3.connect(tmp_path / "x.db", timeout=0.01)
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    with pytest.raises(sqlite3.IntegrityError) as unique:
        conn.execute("INSERT INTO t VALUES (1)")
    assert isinstance(from_sqlite(unique.value, "db"), ConcurrencyConflictError)
    conn.rollback()
    other = sqlite3.connect(tmp_path / "x.db", timeout=0.01, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as locked:
        conn.execute("INSERT INTO t VALUES (2)")
    assert isinstance(from_sqlite(locked.value, "db"), DatabaseBusyError)
    other.rollback()


def test_requeue_is_refused_while_the_subject_has_another_live_job(defined: Ledger) -> None:
    """At most one live job per subject: a dead job's requeue waits for the live one."""
    from ledger import Failure, FailureKind, InvalidTransitionError

    where = Subject(source_id="s", uri="u")
    dead = defined.enqueue("t", subject=where).job_id
    [job] = defined.claim("w")
    assert job.lease is not None and dead is not None
    defined.fail(job.lease, Failure(kind=FailureKind.TERMINAL, code="x", message="y"))
    live = defined.enqueue("t", subject=where).job_id
    before = defined.store.head_position()
    with pytest.raises(InvalidTransitionError, match=str(live)):
        defined.requeue(dead)
    assert defined.store.head_position() == before
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.succeed(job.lease)
    assert defined.requeue(dead).status == "pending"


@pytest.mark.parametrize(
    "write",
    [
        lambda ledger, lease: ledger.progress(lease, done=2.5),
        lambda ledger, lease: ledger.progress(lease, total=True),
        lambda ledger, lease: ledger.progress(lease, checkpoint={"x": object()}),
        lambda ledger, lease: ledger.succeed(lease, revision=5),
        lambda ledger, lease: ledger.fail(
            lease, Failure(kind=FailureKind.RETRYABLE, code=5, message="m")
        ),
        lambda ledger, lease: ledger.release(lease, reason=3),
    ],
)
def test_wrongly_typed_worker_writes_are_refused(defined: Ledger, write: Any) -> None:
    """Worker writes are type-checked too: nothing unreadable is ever stored."""
    job_id = defined.enqueue("t").job_id
    [job] = defined.claim("w")
    assert job.lease is not None
    before = defined.store.head_position()
    with pytest.raises(InvalidRequestError):
        write(defined, job.lease)
    assert defined.store.head_position() == before
    assert defined.get(job_id) == job  # type: ignore[arg-type]


def test_lease_lengths_can_differ_per_job_type(defined: Ledger, clock: FakeClock) -> None:
    """claim and heartbeat_many take a per-type mapping of lease lengths."""
    from datetime import timedelta

    defined.define("long")
    defined.enqueue("t")
    defined.enqueue("long")
    lengths = {"long": 300.0}
    jobs = {j.job_type: j for j in defined.claim("w", limit=2, lease_s=lengths)}
    now = clock.now()
    assert jobs["long"].lease_expires_at == now + timedelta(seconds=300)
    assert jobs["t"].lease_expires_at == now + timedelta(seconds=30)  # the default
    clock.advance(10)
    leases = [j.lease for j in jobs.values() if j.lease is not None]
    renewed = {s.job_type: s for s in defined.heartbeat_many(leases, lease_s=lengths).accepted}
    assert renewed["long"].lease_expires_at == clock.now() + timedelta(seconds=300)


def test_url_parameters_reach_pooled_connections(pg_url: str) -> None:
    """Options in the URL (here application_name) apply to every pooled connection."""
    with Ledger.open(f"{pg_url}?application_name=jl_probe", pool_size=2) as ledger:
        rows = ledger.store.read("tables_present")  # any query, on a pooled connection
        assert rows
        with ledger.store.read_snapshot() as snapshot:
            [row] = snapshot.fetch_composed("SHOW application_name", {})
            assert row["application_name"] == "jl_probe"
