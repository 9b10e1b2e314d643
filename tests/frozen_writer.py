"""A PostgreSQL writer frozen (SIGSTOP) at a chosen point of a write, for tests.

:func:`frozen_writer` starts a real process that opens the ledger, enqueues once, then
enqueues again and stops itself with SIGSTOP at ``where``:

- ``"mid-pipeline"``: inside the append's pipelined writes (the events inserted, the queue
  rows not yet sent; no Sync): the server shows the session ``active``, waiting on its
  client;
- ``"after-pipeline"``: after the pipeline ended, before the commit: ``idle in transaction``.

Either way it holds the events table's lock (its ledger auto-defines types, and such an
enqueue takes the lock before it reads; a plain worker-path write takes none). With
``waiter``, another thread of the child has started an enqueue first, which waits for that
lock when the process stops: a frozen process's queued unit of work. The parent
waits for the stop itself (``waitpid`` with ``WUNTRACED``), so nothing races. The hook wraps
one method of the unit of work in the child only; what the product code sends is unchanged.

Run as a script, this module is that child: ``python frozen_writer.py URL WHERE IDLE_S
[waiter]``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

WAIT_S = 20.0
"""The most a helper waits for the server to show what it waits for."""


@dataclass
class Frozen:
    """The stopped child and its database session."""

    process: subprocess.Popen[str]
    backend_pid: int
    waiter_pid: int | None
    """The child's other session, waiting for the lock (with ``waiter``)."""


def session_of(url: str, pid: int) -> dict[str, Any] | None:
    """``pg_stat_activity``'s row for backend ``pid`` (read in the ledger's own database), and
    whether it holds the events table's lock; ``None`` once the session is gone."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.cursor(row_factory=psycopg.rows.dict_row)
        row = cursor.execute(
            "SELECT state, wait_event_type, wait_event, query,"
            " EXISTS (SELECT FROM pg_locks WHERE pid = a.pid AND granted"
            "   AND relation = 'jl_events'::regclass AND mode = 'ExclusiveLock') AS holds_lock"
            " FROM pg_stat_activity AS a WHERE pid = %s",
            [pid],
        ).fetchone()
    return row


def wait_for(what: str, condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    """Poll ``condition`` (a look at the server's views: no event to wait on) until true."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout_s} s")
        time.sleep(0.02)


def lock_waiters(url: str) -> list[int]:
    """Backends of ``url``'s database waiting for a lock on the events table: the exclusive
    one (a serialised append) or an insert's ``ROW EXCLUSIVE`` (a worker-path append, which
    takes no table lock but waits behind a holder of the exclusive one)."""
    return _events_lock(url, granted=False, modes=("ExclusiveLock", "RowExclusiveLock"))


def lock_holders(url: str) -> list[int]:
    """Backends of ``url``'s database holding the events table's (exclusive) lock."""
    return _events_lock(url, granted=True, modes=("ExclusiveLock",))


def _events_lock(url: str, *, granted: bool, modes: tuple[str, ...]) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE granted = %s AND mode = ANY(%s)"
            " AND relation = 'jl_events'::regclass",
            [granted, list(modes)],
        ).fetchall()
    return [int(row[0]) for row in rows]


@contextmanager
def frozen_writer(
    url: str, where: str, *, idle_s: float = 1.0, waiter: bool = False
) -> Iterator[Frozen]:
    """A child process stopped at ``where`` inside a write holding the events table's lock
    (and with ``waiter`` another of its sessions waiting for it), its ledger opened with an
    idle-in-transaction timeout of ``idle_s``; killed on exit."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__)), url, where, str(idle_s)]
        + (["waiter"] if waiter else []),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == "freezing", line
        _, status = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        holders = lock_holders(url)
        assert len(holders) == 1, holders
        waiters = lock_waiters(url)
        assert len(waiters) == (1 if waiter else 0), waiters
        yield Frozen(process, holders[0], waiters[0] if waiter else None)
    finally:
        process.send_signal(signal.SIGCONT)
        process.kill()
        process.wait()


def _child(url: str, where: str, idle_s: float, waiter: bool) -> None:
    import threading

    from ledger import EnqueueRequest, Ledger
    from ledger.store.postgres.unit_of_work import PostgresUnitOfWork

    def queued_enqueue() -> None:
        # Auto-defining, like the frozen one: such an enqueue takes the events-table lock.
        with Ledger.open(url, auto_define=True, pool_size=1, idle_in_transaction_s=idle_s) as other:
            other.enqueue("frozen")

    def stop() -> None:
        if waiter:
            threading.Thread(target=queued_enqueue, daemon=True).start()
            wait_for("the child's other enqueue waiting", lambda: len(lock_waiters(url)) == 1)
        os.kill(os.getpid(), signal.SIGSTOP)

    with Ledger.open(url, auto_define=True, pool_size=1, idle_in_transaction_s=idle_s) as ledger:
        ledger.enqueue("frozen")  # defines the type: the frozen write is a plain enqueue
        if where == "mid-pipeline":
            write_queue = PostgresUnitOfWork._write_queue

            def frozen_write_queue(self: PostgresUnitOfWork, *args: Any) -> None:
                stop()
                write_queue(self, *args)

            PostgresUnitOfWork._write_queue = frozen_write_queue  # type: ignore[method-assign]
        elif where == "after-pipeline":
            write_phase = PostgresUnitOfWork._write_phase

            @contextmanager
            def frozen_write_phase(self: PostgresUnitOfWork, new_jobs: int) -> Iterator[None]:
                with write_phase(self, new_jobs):
                    yield
                stop()

            PostgresUnitOfWork._write_phase = frozen_write_phase  # type: ignore[method-assign]
        elif where == "mid-copy":
            from ledger.store.postgres import bulk_writes

            copy_values = bulk_writes.copy_values

            def frozen_rows(rows: Iterable[Any]) -> Iterator[Any]:
                for row in rows:
                    yield row
                    stop()  # the COPY started, its first row not yet sent

            def frozen_copy_values(*args: Any) -> None:
                copy_values(*args[:-1], frozen_rows(args[-1]))

            bulk_writes.copy_values = frozen_copy_values  # type: ignore[assignment]
            print("freezing", flush=True)
            ledger.enqueue_many([EnqueueRequest("frozen")] * bulk_writes.COPY_THRESHOLD)
            return
        else:
            raise SystemExit(f"unknown place {where!r}")
        print("freezing", flush=True)
        ledger.enqueue("frozen")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:] == ["waiter"])
