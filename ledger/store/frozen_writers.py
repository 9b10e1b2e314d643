"""Frozen writers: sessions the watchdog ended, as the store reports them.

A writer frozen in the middle of a PostgreSQL write (SIGSTOP, a paused VM, a debugger) keeps
its locks, the events table's among them, and the server's own
``idle_in_transaction_session_timeout`` does not end it: between the statements of a pipelined
write the session is ``active``, not idle. :meth:`Store.end_frozen_writers
<ledger.store.store.Store.end_frozen_writers>` ends such sessions when they block another, or
when they stay frozen past the idle-in-transaction timeout; the
criteria are in :mod:`ledger.store.postgres.frozen_writers` and ``docs/operations.md``.
"""

from __future__ import annotations

from typing import NamedTuple


class FrozenWriter(NamedTuple):
    """A session of the ledger's database ended as frozen: either frozen inside a write while
    others waited on its locks, or another stuck session of the same process
    (:attr:`frozen_pid` set)."""

    pid: int
    """The server process id of the session."""
    user: str
    application_name: str
    """A jobledger store's sessions carry ``jobledger <pid>@<host>``: which process it was."""
    client_addr: str | None
    """The client's address (``None``: a Unix socket)."""
    state: str
    """``active`` (frozen mid-pipeline), ``idle in transaction``, or for another session of
    the process whatever it was doing (waiting for a lock: ``active``)."""
    silent_s: float
    """Seconds since its last statement began, with its client silent since."""
    transaction_s: float
    """Seconds since its transaction began."""
    blocked_pids: tuple[int, ...]
    """The sessions that were waiting on its locks (empty for another session of a frozen
    process, and for a session ended because it stayed frozen past the idle-in-transaction
    timeout while nobody waited: its row locks still hid its jobs from the reaper)."""
    frozen_pid: int | None
    """For another session of a frozen process: the frozen session it was ended with."""
    query: str
    """Its last statement (cut to 200 characters)."""
    ended: bool
    """Whether the server accepted to end it (``pg_terminate_backend``)."""
