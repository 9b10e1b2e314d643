"""A store lent an application's connection: its writes join the application's transaction.

:meth:`Store.joining <ledger.store.store.Store.joining>` wraps a connection the application
opened (a ``psycopg.Connection`` or a ``sqlite3.Connection``) with a transaction of its own
already open. Every unit of work then runs on that connection inside a savepoint, so its
events and view rows are the application's uncommitted writes: they commit when the
application commits, and vanish when it rolls back. Nothing here commits, and nothing retries:
a retry of a unit of work would need the whole application transaction run again, which only
the application can do, so a conflict or a busy database is raised as a ledger error and the
savepoint leaves the application's transaction usable.

Reads run on the connection too (a job enqueued in the transaction is visible to it before
the commit). What is not the application's transaction stays the owning store's: the
operational table (``jl_pools``), listeners, and the schema.

Backends: :mod:`ledger.store.postgres.joined`, :mod:`ledger.store.sqlite.joined`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ledger.core.errors import InvalidRequestError
from ledger.store.notifications import AsyncListening, Listening, Topic
from ledger.store.store import Store


class JoinedStore(Store):
    """The part of a joined store that does not depend on the backend (see the module)."""

    def __init__(self, owner: Store) -> None:
        super().__init__()
        self.owner = owner
        self.codec = owner.codec
        self.ids = owner.ids
        self.queries = owner.queries
        self.recorder = owner.recorder
        self.policies = owner.policies
        self.turn = threading.Lock()
        """Held by each unit of work or read for its whole savepoint: one connection runs
        one at a time, also when the async ledger's threads are handed it together."""

    def write_operational(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        # jl_pools is what processes report of themselves: never part of an app's commit.
        return self.owner.write_operational(query, params)

    def view_tables(self) -> NoReturn:
        raise _not_in_joined("rebuild or catch up projections")

    def _create_schema(self) -> NoReturn:
        raise _not_in_joined("create or migrate the schema")

    def listen(self, topic: Topic, on_notify: Callable[[], None]) -> Listening:
        return self.owner.listen(topic, on_notify)

    async def listen_async(
        self,
        topic: Topic,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> AsyncListening:
        return await self.owner.listen_async(topic, on_notify, on_payload)

    def close(self) -> None:
        """Nothing to close: the connection is the application's, the owner the ledger's."""


def _not_in_joined(what: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"cannot {what} in the application's transaction: use the ledger itself"
    )
