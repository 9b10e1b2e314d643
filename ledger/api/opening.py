"""Opening a ledger's store: refuse a database without a ledger, or bring one up to date.

What :meth:`ledger.api.ledger.Ledger.open` (and ``jobledger init``) does before it wraps the
store.
"""

from __future__ import annotations

from typing import NamedTuple

from ledger.api.migrate import Refill, migrate, missing_views, refill
from ledger.api.migrate import plan as migration_plan
from ledger.store.config import open_store
from ledger.store.schema import MIGRATION_WAIT_S, expected_tables
from ledger.store.store import Store
from projections.rebuilder import Progress, Rebuilder


class OpenedStore(NamedTuple):
    store: Store
    created: bool
    """Whether the tables had to be created."""
    rebuilt: list[str]
    """The stale projections that were rebuilt."""
    created_tables: list[str] = []
    """The tables created in a database that already held some (empty on a fresh one)."""
    refilled: list[Refill] = []
    """The projections rebuilt from the history because their tables had been missing."""


def open_ready_store(
    url: str | None,
    *,
    create: bool,
    pool_size: int | None,
    progress: Progress | None = None,
    idle_in_transaction_s: float | None = None,
    wait_s: float = MIGRATION_WAIT_S,
) -> OpenedStore:
    """Open the store at ``url``; without ``create`` a database that has no ledger is
    refused, with it the tables are created or migrated as needed, and a projection whose
    table had to be created under an existing history is rebuilt from it (``progress``
    reports that rebuild). Closes the store on error. A change waits up to ``wait_s`` for
    another process's change of the same database to end (:meth:`Store.schema_lock`).
    """
    store = open_store(
        url, pool_size=pool_size, create=create, idle_in_transaction_s=idle_in_transaction_s
    )
    try:
        opened = OpenedStore(store, False, [])
        if not create:
            store.check_initialised()
        elif _up_to_date(store):
            # No DDL (it would take table locks under running workers), no lock to wait
            # for: only record the versions of projections that have none.
            Rebuilder(store).refresh()
        else:
            # One schema change at a time: another process's may be under way; once it
            # has ended, look again (it may have done everything).
            with store.schema_lock(wait_s):
                opened = _make_ready(store, progress)
    except BaseException:
        store.close()
        raise
    return opened


def _up_to_date(store: Store) -> bool:
    """Whether the database holds this code's whole schema (another version is refused)."""
    return store.schema_state()[1] is not None and migration_plan(store).empty


def _make_ready(store: Store, progress: Progress | None) -> OpenedStore:
    """Create or migrate the schema, under the migration lock."""
    if store.schema_state()[1] is None:
        tables = store.schema_state()[0]
        missing = sorted(expected_tables() - tables)
        created = store.initialise()
        Rebuilder(store).refresh()  # records each projection's version
        # An interrupted init, or a lost jl_meta under a history: refill what was missing.
        refilled = refill(store, missing_views(missing), progress=progress)
        return OpenedStore(store, created, [], missing if tables else [], refilled)
    if migration_plan(store).empty:
        # Another process made it ready while this one waited for the lock.
        Rebuilder(store).refresh()
        return OpenedStore(store, False, [])
    # What `jobledger migrate` does (stale views rebuilt, logged; then what is missing
    # created and what it emptied rebuilt — see ledger.api.migrate).
    migrated = migrate(store, progress=progress)
    return OpenedStore(
        store,
        bool(migrated.created_tables),
        migrated.rebuilt,
        migrated.created_tables,
        migrated.refilled,
    )
