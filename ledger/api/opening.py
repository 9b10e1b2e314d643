"""Opening a ledger's store: refuse a database without a ledger, or bring one up to date.

What :meth:`ledger.api.ledger.Ledger.open` does before it wraps the store.
"""

from __future__ import annotations

from typing import NamedTuple

from ledger.api.migrate import migrate
from ledger.api.migrate import plan as migration_plan
from ledger.store.config import open_store
from ledger.store.store import Store
from projections.runners.rebuilder import Rebuilder


class OpenedStore(NamedTuple):
    store: Store
    created: bool
    """Whether the tables had to be created."""
    rebuilt: list[str]
    """The stale projections that were rebuilt."""


def open_ready_store(url: str | None, *, create: bool, pool_size: int | None) -> OpenedStore:
    """Open the store at ``url``; without ``create`` a database that has no ledger is
    refused, with it the tables are created or migrated as needed. Closes the store on error.
    """
    store = open_store(url, pool_size=pool_size, create=create)
    try:
        created, rebuilt = False, []
        if not create:
            store.check_initialised()
        elif store.schema_state()[1] is None:
            created = store.initialise()
            Rebuilder(store).refresh()  # records each projection's version
        elif migration_plan(store).empty:
            # Up to date: no DDL (it would take table locks under running workers); only
            # record the versions of projections that have none.
            Rebuilder(store).refresh()
        else:
            # What `jobledger migrate` does (stale views rebuilt, logged; then what is
            # missing created — in that order, see ledger.api.migrate).
            migrated = migrate(store)
            created, rebuilt = bool(migrated.created_tables), migrated.rebuilt
    except BaseException:
        store.close()
        raise
    return OpenedStore(store, created, rebuilt)
