"""The PostgreSQL datastore whose checkouts hand out only connections known to be alive.

The server can end a pooled connection while it sits idle (``pg_terminate_backend``, a
restart, a network cut); psycopg_pool notices only when a statement fails on it, so without
a check each dead connection in the pool fails one caller's unit of work — a completion, a
claim — until the pool has met them all. Here every checkout first sends an empty query
(psycopg_pool's :meth:`ConnectionPool.check_connection`, one round trip; its cost on the
claim/complete path is in ``docs/operations.md``). A connection that fails it goes back to
the pool, which discards it and opens a replacement, and the next one is tried.

Not psycopg_pool's own ``check=`` option (eventsourcing's ``pre_ping``): its checkout loop
sleeps with back-off (1 s, 2 s, 4 s…) after each connection that fails the check, so after a
drop of four or more pooled connections a checkout would wait out its whole timeout and fail
instead of reaching a fresh one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psycopg
from eventsourcing.postgres import PostgresDatastore
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool


def answers(conn: psycopg.Connection[DictRow]) -> bool:
    """Whether ``conn`` still reaches its server (one empty query)."""
    try:
        ConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


class CheckedDatastore(PostgresDatastore):  # type: ignore[misc]  # untyped base
    """eventsourcing's datastore with a checked checkout (see the module docstring); every
    user of the pool — units of work, reads, the recorder's own selects — goes through it."""

    @contextmanager
    def get_connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        """A pooled connection that answered a ping at checkout.

        Dead ones met on the way are handed back (and so discarded); at most one per
        connection the pool can hold is tried, then a last one unchecked, whose statement
        will fail if it is dead too. Errors are eventsourcing's, as from the base class (a
        pool timeout while the server is down, for one)."""
        for _ in range(self.pool.max_size + 1):
            with ExitStack() as checkout:
                conn = checkout.enter_context(super().get_connection())
                if answers(conn):
                    yield conn
                    return
        with super().get_connection() as conn:
            yield conn
