"""A psycopg pipeline whose exit leaves the server's idle-in-transaction timer running.

psycopg's pipeline ends with a Sync and then a Flush request. PostgreSQL arms
``idle_in_transaction_session_timeout`` when it answers the Sync (ReadyForQuery), and disarms
it on reading the next message, the Flush, without arming it again (only a Sync or a simple
query does). Until the unit of work's next statement, the session is ``idle in transaction``
with no timeout at all: a worker frozen there (SIGSTOP, a paused VM) keeps its locks, the
events table's among them, until it resumes or dies. The chaos suite found exactly that: every
writer waiting ~14 s behind a stopped worker's session, ``idle in transaction`` after
``UPDATE jl_queue``, never ended by its 2 s timeout (a plain transaction that goes silent is
ended after 2 s; the same after a pipeline was still there after 3 s, measured).

The Flush is redundant after a Sync: libpq's ``PQpipelineSync`` sends its buffer and the
server flushes its output with ReadyForQuery. :func:`synced_pipeline` therefore ends the
pipeline as psycopg's own :meth:`Pipeline.sync` does (Sync, then read every result) and
sends no Flush. That overrides psycopg's private ``_exit_gen`` (psycopg 3.2 to 3.3);
``tests/contract/test_frozen_writers.py`` pins the server's behaviour, so a psycopg that
changes it fails there, not in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.abc import PQGen


class SyncedPipeline(psycopg.Pipeline):
    """A :class:`psycopg.Pipeline` that exits on its Sync alone (see the module docstring)."""

    def _exit_gen(self) -> PQGen[None]:
        try:
            self._enqueue_sync()
            yield from self._communicate_gen()
        finally:
            yield from self._fetch_gen(flush=False)


@contextmanager
def synced_pipeline(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Pipeline]:
    """``conn.pipeline()``, with a :class:`SyncedPipeline` when none is open yet."""
    with conn.lock:
        if conn._pipeline is None:
            # Connection.pipeline() uses the pipeline it finds, and clears it on exit.
            conn._pipeline = SyncedPipeline(conn)
    with conn.pipeline() as pipeline:
        yield pipeline
