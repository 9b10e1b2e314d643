"""The PostgreSQL datastore whose checkouts hand out only connections known to be alive.

The server can end a pooled connection while it sits idle (``pg_terminate_backend``, a
restart, a network cut); psycopg_pool notices only when a statement fails on it, so without
a check each dead connection in the pool fails one caller's unit of work — a completion, a
claim — until the pool has met them all. Here every checkout is checked first
(:func:`answers`: a look at the socket, then psycopg_pool's
:meth:`ConnectionPool.check_connection`, an empty query, if the server wrote to the idle
connection; the cost on the claim/complete path is in ``docs/operations.md``). A connection
that fails the check goes back to the pool, which discards it and opens a replacement, and
the next one is tried.

After a restart the pool reconnects on its own schedule, with a back-off that doubles from 1 s
(so after a 15 s outage its next try may come 16 s later, past a 30 s lease; after a 2 s one,
2 s later, past a short lease's last chance to record an outcome). A checkout therefore waits
for the pool only briefly (:data:`POOL_WAIT_S`, not the whole connect timeout) and then tries
one connection of its own, outside the pool: if the server is back, that connection serves
this unit of work (and is closed after it), so callers recover as soon as the server does.
Until the pool has an idle connection again, later checkouts skip the wait and connect on
their own at once (while the server is still down, that fails at once too). At most as many
own connections as the pool may hold are open at a time (a pool merely busy for longer than
the wait must not become a connection storm); past that a checkout waits in the pool for the
rest of the connect timeout.

Not psycopg_pool's own ``check=`` option (eventsourcing's ``pre_ping``): its checkout loop
sleeps with back-off (1 s, 2 s, 4 s…) after each connection that fails the check, so after a
drop of four or more pooled connections a checkout would wait out its whole timeout and fail
instead of reaching a fresh one.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psycopg
from eventsourcing.persistence import OperationalError
from eventsourcing.postgres import PostgresDatastore
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolTimeout

POOL_WAIT_S = 0.5
"""How long a checkout waits for a pooled connection before it tries one of its own: long
enough for a busy pool to hand one back, short against any lease."""


def _has_input(conn: psycopg.Connection[DictRow]) -> bool:
    """Whether the server sent something to an idle connection (or closed it)."""
    if not hasattr(select, "poll"):
        return True  # no cheap look: always ping
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


def answers(conn: psycopg.Connection[DictRow]) -> bool:
    """Whether ``conn`` still reaches its server.

    An idle pooled connection receives nothing unless the server ended it (it sends a
    FATAL error, then closes the socket): only then is the full ping, an empty query, sent.
    That look costs a microsecond where the ping costs a round trip (see
    ``docs/operations.md``); a connection cut without the server's word (a network
    partition) is not caught by either before its statement fails."""
    if conn.closed:
        return False
    if not _has_input(conn):
        return True
    try:
        ConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


class CheckedDatastore(PostgresDatastore):  # type: ignore[misc]  # untyped base
    """eventsourcing's datastore with a checked checkout (see the module docstring); every
    user of the pool — units of work, reads, the recorder's own selects — goes through it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.connect_timeout: float = self.pool.timeout
        # The pool's own wait is the short one; the connect timeout bounds own connections.
        self.pool.timeout = min(self.connect_timeout, POOL_WAIT_S)
        self._own_connections = threading.BoundedSemaphore(self.pool.max_size)
        self._pool_recovering = False

    @contextmanager
    def get_connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        """A pooled connection that answered a ping at checkout, or one of its own.

        Dead ones met on the way are handed back (and so discarded); at most one per
        connection the pool can hold is tried, then a last one unchecked, whose statement
        will fail if it is dead too. While the pool is reconnecting, or once it made this
        checkout wait :data:`POOL_WAIT_S`, a connection of its own (see the module
        docstring). Errors are eventsourcing's, as from the base class (a pool timeout
        while the server is down, for one)."""
        with ExitStack() as checkout:
            if self._pool_recovering and not self.pool.get_stats().get("pool_available"):
                own = self._own(checkout)
                if own is not None:
                    yield own
                    return
            try:
                conn = self._checkout(checkout)
            except OperationalError as exc:
                if not isinstance(exc.__cause__, PoolTimeout):
                    raise
                # Until the pool hands out a connection again: no more waits in it (while
                # the server is down, a refused connection of its own fails faster).
                self._pool_recovering = True
                conn = self._own(checkout) or self._pooled_at_last(checkout, exc)
            else:
                self._pool_recovering = False
            yield conn

    def _own(self, checkout: ExitStack) -> psycopg.Connection[DictRow] | None:
        """A connection of its own, if fewer than the pool's size are open; raises the
        pool's timeout error if the server cannot be reached."""
        if not self._own_connections.acquire(blocking=False):
            return None
        checkout.callback(self._own_connections.release)
        conn: psycopg.Connection[DictRow] = checkout.enter_context(self.unpooled())
        return conn

    def _pooled_at_last(
        self, checkout: ExitStack, timeout: OperationalError
    ) -> psycopg.Connection[DictRow]:
        """Every own connection is in use: wait in the pool for the rest of the connect
        timeout, as a plain pool would."""
        try:
            conn: psycopg.Connection[DictRow] = checkout.enter_context(
                self.pool.connection(timeout=max(0.0, self.connect_timeout - POOL_WAIT_S))
            )
        except PoolTimeout:
            raise timeout  # noqa: B904 - the pool's error, with its cause, is the one to map
        return conn

    def _checkout(self, checkout: ExitStack) -> psycopg.Connection[DictRow]:
        for _ in range(self.pool.max_size):
            with ExitStack() as attempt:
                conn: psycopg.Connection[DictRow] = attempt.enter_context(super().get_connection())
                if answers(conn):
                    checkout.enter_context(attempt.pop_all())
                    return conn
        last: psycopg.Connection[DictRow] = checkout.enter_context(super().get_connection())
        return last  # unchecked: if it is dead too, its statement says so

    @contextmanager
    def unpooled(self) -> Iterator[psycopg.Connection[DictRow]]:
        """A connection of its own, set up as the pool's are, closed after use; raises
        eventsourcing's :class:`OperationalError` if the server cannot be reached."""
        kwargs = {
            "connect_timeout": max(1, round(self.connect_timeout)),
            **(self.pool.kwargs or {}),
        }
        try:
            conn = psycopg.Connection[DictRow].connect(**kwargs)
        except psycopg.OperationalError as exc:
            raise OperationalError(str(exc)) from exc
        with conn:
            self.after_connect_func()(conn)
            yield conn
