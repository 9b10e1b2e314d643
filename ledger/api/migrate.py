"""``jobledger migrate``: bring an existing ledger's schema up to this code.

Two kinds of change, in this order:

1. projections whose recorded schema version differs from the code's are *stale*: each is
   rebuilt from the history into a shadow table of the new shape and swapped in
   (:class:`projections.runners.rebuilder.Rebuilder`), with the system running;
2. tables and indexes this code expects and the database lacks are created (every schema
   statement is ``IF NOT EXISTS``; running them after the rebuilds means an index on a column a
   stale table lacked is created on the rebuilt table, not refused by the old one).

The events themselves never change: the schema of ``jl_events`` is the eventsourcing
library's, and old event versions are upcast when read (:mod:`ledger.core.codec`).
"""

from __future__ import annotations

import time

import msgspec

from ledger.core.errors import DatabaseNotInitialisedError, DatabaseUnusableError
from ledger.store.schema import EXPECTED_TABLES, SCHEMA_VERSION
from ledger.store.store import Store
from projections.runners.rebuilder import Progress, Rebuilder


class MigrationPlan(msgspec.Struct, frozen=True):
    """What a migration would do."""

    schema_version: str
    missing_tables: list[str]
    stale: list[str]
    """Projections to rebuild, each with ``name (recorded vN, code vM)``."""
    stale_names: list[str]

    @property
    def empty(self) -> bool:
        return not self.missing_tables and not self.stale_names


class MigrationReport(msgspec.Struct, frozen=True):
    """What a migration did."""

    plan: MigrationPlan
    rebuilt: list[str]
    created_tables: list[str]
    seconds: float


def plan(store: Store) -> MigrationPlan:
    """What :func:`migrate` would do to ``store``; refuses a database that holds no ledger or
    another schema version."""
    tables, marker = store.schema_state()
    if marker is None:
        state = "is partly initialised" if tables else "has no jobledger tables"
        raise DatabaseNotInitialisedError(f"database {state}; run `jobledger init` first")
    if marker != SCHEMA_VERSION:
        raise DatabaseUnusableError(
            f"database holds jobledger schema {marker}; this code uses {SCHEMA_VERSION}"
        )
    stale = [s for s in Rebuilder(store).status() if s.stale]
    return MigrationPlan(
        schema_version=marker,
        missing_tables=sorted(EXPECTED_TABLES - tables),
        stale=[f"{s.name} (recorded v{s.recorded_version}, code v{s.code_version})" for s in stale],
        stale_names=[s.name for s in stale],
    )


def migrate(store: Store, *, progress: Progress | None = None) -> MigrationReport:
    """Rebuild the stale projections, then create what is missing (see the module)."""
    started = time.perf_counter()
    planned = plan(store)
    rebuilt = Rebuilder(store, progress=progress).refresh()
    created = store.create_missing()
    return MigrationReport(
        plan=planned,
        rebuilt=rebuilt,
        created_tables=created,
        seconds=time.perf_counter() - started,
    )
