"""``jobledger migrate``: bring an existing ledger's schema up to this code.

Three kinds of change, in this order:

1. projections whose recorded schema version differs from the code's are *stale*: each is
   rebuilt from the history into a shadow table of the new shape and swapped in
   (:class:`projections.rebuilder.Rebuilder`), with the system running;
2. tables and indexes this code expects and the database lacks are created (every schema
   statement is ``IF NOT EXISTS``; running them after the rebuilds means an index on a column a
   stale table lacked is created on the rebuilt table, not refused by the old one);
3. a projection whose table was among the missing ones (or, for a tracked one, whose position
   table was) is *refilled*: a table created empty under a ledger with a history would be a
   view silently missing its rows — ``dlq`` saying "no dead jobs" over dead jobs — so it is
   rebuilt from the history at once, in the same command (:func:`refill`). ``init`` does the
   same (:mod:`ledger.api.opening`).

One schema change runs at a time per database: :func:`migrate` holds the store's migration
lock throughout (:meth:`ledger.store.store.Store.schema_lock`), so a second one waits for the
first and then finds nothing to do. Only what the plan names is changed: a migration that
has nothing to create runs no DDL (it would lock tables under running writers), except the
month partitions ahead, made when missing.

The events themselves never change: the schema of ``jl_events`` is the eventsourcing
library's, and old event versions are upcast when read (:mod:`ledger.core.codec`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

import msgspec

from ledger.clock import SystemClock
from ledger.core.errors import DatabaseNotInitialisedError, DatabaseUnusableError
from ledger.store.integrity_tables import chain_head
from ledger.store.schema import MIGRATION_WAIT_S, SCHEMA_VERSION, expected_tables
from ledger.store.store import Store
from ledger.views.catalog import projections, recorded_version, stale
from projections.rebuilder import Progress, Rebuilder

log = logging.getLogger("jobledger.projections")

CHAIN_TABLE = "jl_integrity_head"
"""The hash chain's head: created by a migration, it starts the chain after the events the
ledger holds (:func:`ledger.store.integrity_tables.start_chain`)."""
TRACKING_TABLE = "jl_tracking"
"""Where the tracked projections record their positions: losing it loses theirs."""


class MissingView(msgspec.Struct, frozen=True):
    """A projection emptied by a missing table, to rebuild once the table is created."""

    name: str
    table: str
    """The missing table: the projection's own, or the tracking table for a tracked one."""


class Refill(msgspec.Struct, frozen=True):
    """A projection rebuilt from the history because its table had been missing."""

    name: str
    table: str
    rows: int
    events: int


class MigrationPlan(msgspec.Struct, frozen=True):
    """What a migration would do."""

    schema_version: str
    missing_tables: list[str]
    missing_indexes: list[str]
    """Indexes of this code's schema the database lacks, on tables it has."""
    missing_columns: list[str]
    """Columns (``table.column``) a release added to tables the database has, and it lacks."""
    stale: list[str]
    """Projections to rebuild, each with ``name (recorded vN, code vM)``."""
    stale_names: list[str]
    missing_views: list[MissingView]
    """Projections to rebuild after their missing table is created (never also stale)."""

    @property
    def empty(self) -> bool:
        return not (
            self.missing_tables or self.missing_indexes or self.missing_columns or self.stale_names
        )


class MigrationReport(msgspec.Struct, frozen=True):
    """What a migration did."""

    plan: MigrationPlan
    rebuilt: list[str]
    """The stale projections rebuilt."""
    created_tables: list[str]
    refilled: list[Refill]
    seconds: float
    chain_starts_after: int | None = None
    """Where the history's hash chain starts, if this migration started it (its tables were
    missing): the notification id of the last event before it (0: the first event is the
    chain's). The events up to it are outside the chain (docs/integrity.md)."""


def missing_views(missing_tables: Collection[str]) -> list[MissingView]:
    """The projections whose rows a set of missing tables has lost, in catalogue order."""
    views = []
    for p in projections():
        if p.table in missing_tables:
            views.append(MissingView(p.name, p.table))
        elif p.mode == "tracked" and TRACKING_TABLE in missing_tables:
            views.append(MissingView(p.name, TRACKING_TABLE))
    return views


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
    missing = sorted(expected_tables() - tables)
    lacking = store.schema.missing_indexes(tables)  # a missing table's come with it
    columns = store.schema.missing_columns(tables)
    refilling = missing_views(missing)
    skip = {view.name for view in refilling}
    with store.read_snapshot() as snapshot:  # only jl_meta: the tracking table may be missing
        meta = snapshot.meta()
    outdated = [p for p in stale(meta) if p.name not in skip]
    return MigrationPlan(
        schema_version=marker,
        missing_tables=missing,
        missing_indexes=lacking,
        missing_columns=columns,
        stale=[
            f"{p.name} (recorded v{recorded_version(meta, p)}, code v{p.version})" for p in outdated
        ],
        stale_names=[p.name for p in outdated],
        missing_views=refilling,
    )


def migrate(
    store: Store, *, progress: Progress | None = None, wait_s: float = MIGRATION_WAIT_S
) -> MigrationReport:
    """Rebuild the stale projections, create what is missing, refill what it emptied (see
    the module), holding the migration lock; waits up to ``wait_s`` for another process's
    schema change to end, then plans (and so finds done what that one did)."""
    started = time.perf_counter()
    with store.schema_lock(wait_s):
        planned = plan(store)
        rebuilder = Rebuilder(store, progress=progress)
        if planned.stale_names:
            log.warning("rebuilding stale projections: %s", ", ".join(planned.stale_names))
            rebuilder.rebuild(planned.stale_names)
        if planned.missing_tables or planned.missing_indexes or planned.missing_columns:
            created = store.create_missing()  # makes the months ahead too
        else:
            created = []
            store.ensure_partitions(SystemClock().now())
        refilled = refill(store, planned.missing_views, progress=progress)
        rebuilder.refresh()  # nothing stale is left: only records the versions of new views
    chain_start = None
    if CHAIN_TABLE in created:
        with store.read_snapshot() as snapshot:
            head = chain_head(snapshot)
        chain_start = None if head is None else head.start_position
        if chain_start:
            log.warning(
                "the history's hash chain starts after position %d: the events before it are "
                "outside the chain",
                chain_start,
            )
    return MigrationReport(
        plan=planned,
        rebuilt=planned.stale_names,
        created_tables=created,
        refilled=refilled,
        seconds=time.perf_counter() - started,
        chain_starts_after=chain_start,
    )


def refill(
    store: Store, views: list[MissingView], *, progress: Progress | None = None
) -> list[Refill]:
    """Rebuild ``views`` (their tables just created, empty) from the whole history, in one
    rebuild; nothing to do on an empty history. Logged, and reported per view."""
    if not views or store.head_position() == 0:
        return []
    names = [view.name for view in views]
    log.warning("rebuilding projections whose tables were missing: %s", ", ".join(names))
    report = Rebuilder(store, progress=progress).rebuild(names)
    return [Refill(v.name, v.table, rows=report.rows[v.name], events=report.events) for v in views]
