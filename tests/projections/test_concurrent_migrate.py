"""One schema change at a time (issue 28, item 12): concurrent ``init``/``migrate`` processes
wait for each other and then find the work done, and a migration beside live writers never
ends in a deadlock, on either side."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from concurrent_cli import run_together
from projection_helpers import raw

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.api.migrate import migrate
from ledger.core.values import EnqueueRequest
from ledger.store.config import open_store
from ledger.store.store import Store
from ledger.views.catalog import version_key

PROCESSES = 3


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no ledger in it yet."""
    if request.param == "postgres":
        return str(request.getfixturevalue("empty_pg_url"))
    return f"sqlite:///{tmp_path / 'fresh.db'}"


def _make_migration_needed(url: str, jobs: int = 0) -> None:
    """A ledger whose queue view is stale and whose jl_queue_states table is missing."""
    with Ledger.open(url) as ledger:
        ledger.define("t")
        for start in range(0, jobs, 1_000):
            ledger.enqueue_many(
                [EnqueueRequest("t", {"n": n}) for n in range(start, start + 1_000)]
            )
    raw(url, "UPDATE jl_meta SET value = '0' WHERE key = ?", (version_key("queue"),))
    raw(url, "DROP TABLE jl_queue_states")


def _verified(url: str) -> None:
    with Ledger.open(url) as ledger:
        assert ledger.projections().verify().clean
        assert not any(s.stale for s in ledger.projections().status())


def test_concurrent_inits_of_a_new_database_create_it_once(fresh_url: str) -> None:
    """Three ``init`` processes released together on a new database all exit 0: one says it
    initialised it, the others that it is already initialised; no conflict error."""
    outcomes = run_together(["--db", fresh_url, "init"], PROCESSES)
    assert [o.exit_code for o in outcomes] == [0] * PROCESSES, outcomes
    assert all("error" not in o.stderr for o in outcomes), outcomes
    said = sorted(o.stdout.splitlines()[-1].split(" ")[0] for o in outcomes)
    assert said == ["PostgreSQL" if "postgresql" in fresh_url else "SQLite"] * 2 + [
        "initialised"
    ], outcomes
    _verified(fresh_url)


def test_concurrent_migrates_rebuild_once_and_the_others_find_it_done(db_url: str) -> None:
    """Three ``migrate`` processes released together over a stale view and a missing table:
    one migrates, the others wait for it and then say the ledger is up to date."""
    _make_migration_needed(db_url, jobs=3_000)
    outcomes = run_together(["--db", db_url, "migrate"], PROCESSES)
    assert [o.exit_code for o in outcomes] == [0] * PROCESSES, outcomes
    last_lines = sorted(o.stdout.splitlines()[-1] for o in outcomes)
    assert [line.startswith("migrated ") for line in last_lines].count(True) == 1, outcomes
    assert sum(line.endswith(" is up to date") for line in last_lines) == 2, outcomes
    assert all("error" not in o.stderr for o in outcomes), outcomes
    _verified(db_url)


def test_a_sqlite_change_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    """The SQLite lock file exists only while a change runs: after ``init`` the directory
    holds the ledger's own files only."""
    path = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(path), "init"])
    assert result.exit_code == 0, result.output
    assert not any(p.name.endswith(".migrate-lock") for p in tmp_path.iterdir())


@pytest.fixture
def holder(db_url: str) -> Iterator[Store]:
    """A store of the test's own, to hold the migration lock as another migrate would."""
    store = open_store(db_url, pool_size=1)
    try:
        yield store
    finally:
        store.close()


def test_a_migrate_that_may_not_wait_says_another_is_running(db_url: str, holder: Store) -> None:
    """While another process holds the migration lock, ``migrate --wait 0`` fails at once
    saying so, and ``--wait 0.2`` after that long saying how long it waited; exit 1."""
    runner = CliRunner()
    with holder.schema_lock(0):
        at_once = runner.invoke(cli, ["--db", db_url, "migrate", "--wait", "0"])
        waited = runner.invoke(cli, ["--db", db_url, "migrate", "--wait", "0.2"])
    assert at_once.exit_code == 1
    assert at_once.stderr.startswith("error: store.busy: another jobledger init or migrate is")
    assert "run this one again once it has finished" in at_once.stderr
    assert waited.exit_code == 1, waited.output
    assert "has been running on" in waited.stderr and "for over 0.2 s" in waited.stderr
    if db_url.startswith("postgresql"):
        assert "session pid" in at_once.stderr  # who holds it


def test_a_migrate_waits_for_the_running_one_then_finds_nothing_to_do(
    db_url: str, holder: Store
) -> None:
    """A ``migrate`` started while another holds the lock says it is waiting; once the other
    has migrated and let go, it reports the ledger up to date."""
    _make_migration_needed(db_url)
    with holder.schema_lock(0):
        second = subprocess.Popen(
            [sys.executable, "-m", "jobledger_cli.main", "--db", db_url, "migrate"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert second.stderr is not None
        waiting = second.stderr.readline()  # written once it waits: then migrate here
        assert "another jobledger init or migrate is running on" in waiting
        assert "waiting up to 600 s for it" in waiting
        migrate(holder)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.strip().endswith("is up to date")
    _verified(db_url)


class MigrationThread(threading.Thread):
    """``migrate`` on a store of its own; what it created, or the error it raised."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.outcome: object = None

    def run(self) -> None:
        store = open_store(self.url, pool_size=1)
        try:
            self.outcome = migrate(store).created_tables
        except Exception as exc:
            self.outcome = exc
        finally:
            store.close()


def test_a_migration_beside_an_enqueue_never_deadlocks(pg_url: str) -> None:
    """An enqueue holds the events table and then writes the queue (its order) while a
    migration that must create a table is under way: the enqueue commits without error and
    the migration then finishes (before: ``deadlock detected``; the migration had locked
    ``jl_queue`` for an index and then waited for the events table)."""
    _make_migration_needed(pg_url)
    with (
        psycopg.connect(pg_url) as stopper,
        psycopg.connect(pg_url) as enqueue,
    ):
        # Hold the migration at a table it locks after jl_queue and before jl_events.
        stopper.execute("LOCK TABLE jl_dead_letters IN ROW EXCLUSIVE MODE")
        migration = MigrationThread(pg_url)
        migration.start()
        _wait_for_a_blocked_lock(pg_url, stopper.info.backend_pid)
        enqueue.execute("LOCK TABLE jl_events IN EXCLUSIVE MODE")
        stopper.commit()
        _wait_for_a_blocked_lock(pg_url, enqueue.info.backend_pid)
        enqueue.execute("LOCK TABLE jl_queue IN ROW EXCLUSIVE MODE")  # its queue row
        enqueue.commit()
    migration.join(timeout=60)
    assert migration.outcome == ["jl_queue_states"]
    _verified(pg_url)


def test_a_migration_beside_a_worker_completion_never_deadlocks(pg_url: str) -> None:
    """A completion holds its queue rows and then appends (the other order) while the
    migration waits for the queue table: the completion commits without error and the
    migration, having backed off, then finishes."""
    _make_migration_needed(pg_url)
    with psycopg.connect(pg_url) as completion:
        completion.execute("LOCK TABLE jl_queue IN ROW EXCLUSIVE MODE")
        migration = MigrationThread(pg_url)
        migration.start()
        _wait_for_a_blocked_lock(pg_url, completion.info.backend_pid)
        completion.execute("LOCK TABLE jl_events IN ROW EXCLUSIVE MODE")  # the append
        completion.commit()
    migration.join(timeout=60)
    assert migration.outcome == ["jl_queue_states"]
    _verified(pg_url)


def _wait_for_a_blocked_lock(url: str, writer_pid: int) -> None:
    """Until another session of this database waits for a table lock the writer holds."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(6_000):
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND %s = ANY(pg_blocking_pids(pid))",
                (writer_pid,),
            ).fetchone()
            if row is not None and row[0]:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the migration never waited for the writer's lock")
