"""A writer frozen inside a PostgreSQL write no longer holds every other writer.

Each test freezes a real process (SIGSTOP) at a chosen point of an enqueue, holding the events
table's lock (:mod:`frozen_writer`), and lets another writer wait behind it. After the
pipeline, the server's own idle-in-transaction timeout ends the frozen session; inside the
pipeline (where the server counts the session as active), ``end_frozen_writers`` does (also
when nobody waits: a jobledger writer holding a transaction id) — and leaves alone what it
must not end: another client's session that blocks nobody, one silent for less than the
bound, a COPY, an idle transaction (the server's to end). Without the privilege to end a
session it ends nothing and warns once. SQLite has nothing to end.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
import pytest
from frozen_writer import frozen_writer, lock_holders, lock_waiters, session_of, wait_for
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ledger import Ledger
from ledger.store.postgres import PostgresStore

WRITER_TIMEOUT_S = 15.0


@dataclass
class Writer:
    """An enqueue on a thread of its own (its own ledger), and how it ended."""

    url: str
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def start(self) -> Writer:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            with Ledger.open(self.url, auto_define=True, pool_size=1) as ledger:
                ledger.enqueue("other")
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def finished(self, timeout_s: float = WRITER_TIMEOUT_S) -> bool:
        if not self.done.wait(timeout_s):
            return False
        assert self.error is None, self.error
        return True


@contextmanager
def blocked_writer(url: str, *, waiting: int = 1) -> Iterator[Writer]:
    """A writer waiting for the events table's lock (waited for, so it is really blocked;
    ``waiting``: the waiters there will be with it)."""
    writer = Writer(url).start()
    wait_for("a writer waiting for the lock", lambda: len(lock_waiters(url)) == waiting)
    yield writer


@pytest.mark.postgres
def test_a_writer_frozen_after_its_pipelined_writes_is_ended_by_the_servers_timeout(
    pg_url: str,
) -> None:
    """Frozen between a write's pipeline and its commit, a session is idle in its
    transaction, and the server's idle-in-transaction timeout ends it: the blocked writer goes
    on (before: psycopg's Flush after the Sync disarmed the timer, and it waited forever)."""
    with frozen_writer(pg_url, "after-pipeline", idle_s=1.0) as frozen:
        before = session_of(pg_url, frozen.backend_pid)
        assert before is not None and before["state"] == "idle in transaction"
        assert before["holds_lock"]
        with blocked_writer(pg_url) as writer:
            assert writer.finished(), "the other writer is still blocked"
        assert session_of(pg_url, frozen.backend_pid) is None


@pytest.mark.postgres
def test_a_writer_frozen_mid_pipeline_that_blocks_another_is_ended(pg_url: str) -> None:
    """Frozen inside a write's pipeline, a session is active and waiting on its client, which
    no server timeout ends; ``end_frozen_writers`` ends it, reports it, and the blocked writer
    goes on."""
    with (
        frozen_writer(pg_url, "mid-pipeline", idle_s=1.0) as frozen,
        Ledger.open(pg_url, idle_in_transaction_s=1.0) as ledger,
    ):
        before = session_of(pg_url, frozen.backend_pid)
        assert before is not None and before["holds_lock"]
        assert (before["state"], before["wait_event"]) == ("active", "ClientRead")
        with blocked_writer(pg_url) as writer:
            waiter = lock_waiters(pg_url)[0]
            ended = ledger.end_frozen_writers(silent_s=0.0)
            assert [(w.pid, w.blocked_pids, w.ended) for w in ended] == [
                (frozen.backend_pid, (waiter,), True)
            ]
            assert ended[0].query.startswith("INSERT INTO jl_events")
            assert writer.finished(), "the other writer is still blocked"
        wait_for("the frozen session gone", lambda: session_of(pg_url, frozen.backend_pid) is None)


@pytest.mark.postgres
def test_a_writer_frozen_mid_copy_of_a_large_enqueue_that_blocks_another_is_ended(
    pg_url: str,
) -> None:
    """A large enqueue's COPY into jl_events holds the events-table lock; frozen there, it is
    ended like a frozen pipeline (a COPY into any other table is left alone, below)."""
    with (
        frozen_writer(pg_url, "mid-copy", idle_s=3600.0) as frozen,
        Ledger.open(pg_url) as ledger,
        blocked_writer(pg_url) as writer,
    ):
        waiter = lock_waiters(pg_url)[0]
        wait_for(
            "the COPY waiting on its client",
            lambda: (
                (session_of(pg_url, frozen.backend_pid) or {}).get("wait_event") == "ClientRead"
            ),
        )
        ended = ledger.end_frozen_writers(silent_s=0.0)
        assert [(w.pid, w.blocked_pids, w.ended) for w in ended] == [
            (frozen.backend_pid, (waiter,), True)
        ]
        assert ended[0].query.startswith('COPY "jl_events"')
        assert writer.finished(), "the other writer is still blocked"


@pytest.mark.postgres
def test_a_jobledger_session_idle_in_its_transaction_that_blocks_another_is_ended(
    pg_url: str,
) -> None:
    """A jobledger session idle in its transaction while another waits on its locks is frozen
    too (its units of work never sit idle): ended without waiting for the server's timeout."""
    with (
        frozen_writer(pg_url, "after-pipeline", idle_s=3600.0) as frozen,
        Ledger.open(pg_url) as ledger,
        blocked_writer(pg_url) as writer,
    ):
        ended = ledger.end_frozen_writers(silent_s=0.0)
        assert [(w.pid, w.state, w.ended) for w in ended] == [
            (frozen.backend_pid, "idle in transaction", True)
        ]
        assert ended[0].application_name == f"jobledger {frozen.process.pid}@{socket.gethostname()}"
        assert writer.finished(), "the other writer is still blocked"


@pytest.mark.postgres
def test_a_frozen_process_s_queued_sessions_are_ended_with_it(pg_url: str) -> None:
    """The frozen process's other session, queued for the same lock, is ended in the same
    pass: it does not take the lock next and stall every writer for another bound."""
    with (
        frozen_writer(pg_url, "mid-pipeline", idle_s=3600.0, waiter=True) as frozen,
        Ledger.open(pg_url) as ledger,
        blocked_writer(pg_url, waiting=2) as writer,
    ):
        ended = ledger.end_frozen_writers(silent_s=0.0)
        assert [(w.pid, w.frozen_pid, w.ended) for w in ended] == [
            (frozen.backend_pid, None, True),
            (frozen.waiter_pid, frozen.backend_pid, True),
        ]
        assert frozen.waiter_pid in ended[0].blocked_pids
        assert writer.finished(), "the other writer is still blocked"
        assert lock_holders(pg_url) == []


@pytest.mark.postgres
def test_the_default_bound_is_the_ledgers_idle_in_transaction_timeout(pg_url: str) -> None:
    """Without ``silent_s`` the bound is the one the ledger was opened with: a session frozen
    for less than it is left alone."""
    with (
        frozen_writer(pg_url, "mid-pipeline") as frozen,
        Ledger.open(pg_url, idle_in_transaction_s=3600.0) as ledger,
        blocked_writer(pg_url),
    ):
        assert ledger.store.frozen_writer_bound_s == 1800.0  # half the server's
        assert ledger.end_frozen_writers() == []
        assert session_of(pg_url, frozen.backend_pid) is not None


@pytest.mark.postgres
def test_a_frozen_writer_that_blocks_nobody_is_left_alone_within_the_stalled_bound(
    pg_url: str,
) -> None:
    """A frozen session that nobody waits for is not ended before the stalled bound (the
    idle-in-transaction timeout, the server's own for an idle session), however long past
    the blocking bound."""
    with frozen_writer(pg_url, "mid-pipeline") as frozen, Ledger.open(pg_url) as ledger:
        assert lock_waiters(pg_url) == []
        assert ledger.end_frozen_writers(silent_s=0.0, stalled_s=3600.0) == []
        assert session_of(pg_url, frozen.backend_pid) is not None


@pytest.mark.postgres
def test_a_jobledger_writer_frozen_past_the_stalled_bound_is_ended_though_it_blocks_nobody(
    pg_url: str,
) -> None:
    """Frozen mid-pipeline with no other writer about, a session blocks nobody, yet its row
    locks hide its jobs from every ``SKIP LOCKED`` reader: the reaper could never take back
    a lease it holds (the chaos suite saw one job stay leased 13.5 s so). Past the stalled
    bound it is ended, as the server ends an idle one (before: left alone until it
    resumed)."""
    with frozen_writer(pg_url, "mid-pipeline") as frozen, Ledger.open(pg_url) as ledger:
        assert lock_waiters(pg_url) == []
        ended = ledger.end_frozen_writers(silent_s=0.0)  # stalled bound: twice that
        assert [(w.pid, w.blocked_pids, w.frozen_pid, w.ended) for w in ended] == [
            (frozen.backend_pid, (), None, True)
        ]
        wait_for("the frozen session gone", lambda: session_of(pg_url, frozen.backend_pid) is None)


@pytest.mark.postgres
def test_an_idle_transaction_is_left_to_the_servers_timeout(pg_url: str) -> None:
    """A transaction idle between statements (its client alive, or not) is the server's
    idle-in-transaction timeout's to end, with that session's own bound: not ended here."""
    with (
        psycopg.connect(pg_url) as holder,
        Ledger.open(pg_url) as ledger,
    ):
        holder.execute("LOCK TABLE jl_events IN EXCLUSIVE MODE")
        with blocked_writer(pg_url) as writer:
            assert ledger.end_frozen_writers(silent_s=0.0) == []
            holder.rollback()
            assert writer.finished()


COPY_CHILD = """
import os, signal, sys
import psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute("LOCK TABLE jl_events IN EXCLUSIVE MODE")
    conn.execute("CREATE TEMP TABLE rows (n int)")
    with conn.cursor().copy("COPY rows (n) FROM STDIN") as copy:
        copy.write_row((1,))
        print("copying", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
"""


@pytest.mark.postgres
def test_a_copy_in_progress_is_left_alone(pg_url: str) -> None:
    """A session in ``COPY FROM STDIN`` also waits on its client while it streams (a
    projection rebuild's load): even frozen and blocking a writer, it is not ended."""
    child = subprocess.Popen(
        [sys.executable, "-c", COPY_CHILD, pg_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "copying"
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        [copying] = lock_holders(pg_url)
        with Ledger.open(pg_url) as ledger, blocked_writer(pg_url):
            wait_for(
                "the COPY waiting on its client",
                lambda: (session_of(pg_url, copying) or {}).get("wait_event") == "ClientRead",
            )
            assert ledger.end_frozen_writers(silent_s=0.0) == []
            assert session_of(pg_url, copying) is not None
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait()


@pytest.fixture
def watcher_url(pg_url: str) -> Iterator[str]:
    """``pg_url`` as a role that may see every session but not end a superuser's."""
    role = f"jl_watcher_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE pg_read_all_stats')
    try:
        yield make_conninfo(pg_url, user=role)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                [role],
            )
            admin.execute(f'DROP ROLE "{role}"')


@pytest.mark.postgres
def test_without_the_privilege_to_end_a_session_nothing_is_ended_and_one_warning_logged(
    pg_url: str, watcher_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A role that may not end the frozen session (a superuser's) ends nothing, raises
    nothing, and warns once however often it tries."""
    assert conninfo_to_dict(watcher_url)["user"] != conninfo_to_dict(pg_url).get("user")
    store = PostgresStore(watcher_url)
    try:
        with frozen_writer(pg_url, "mid-pipeline") as frozen, blocked_writer(pg_url):
            with caplog.at_level(logging.DEBUG, logger="ledger.store.postgres.frozen_writers"):
                assert store.end_frozen_writers(silent_s=0.0) == []
                assert store.end_frozen_writers(silent_s=0.0) == []
            assert session_of(pg_url, frozen.backend_pid) is not None
    finally:
        store.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "pg_signal_backend" in warnings[0].getMessage()


def test_sqlite_has_no_frozen_writer_to_end(sqlite_url: str) -> None:
    """On SQLite nothing outside a frozen writer can take its write lock back: the store says
    so and ends nothing."""
    with Ledger.open(sqlite_url) as ledger:
        assert not ledger.store.ends_frozen_writers
        assert ledger.store.frozen_writer_bound_s is None
        assert ledger.end_frozen_writers(silent_s=0.0) == []
