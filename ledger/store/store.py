"""The store: one database holding one ledger, read and written through a few seams.

- writes: :meth:`Store.unit_of_work` (:mod:`ledger.store.unit_of_work`), the way anything
  is written; after a commit that may have made jobs claimable it wakes this process's
  listeners (:mod:`ledger.store.listeners`). One narrower seam, for a worker that holds its
  jobs' states already: :meth:`Store.append_if_unchanged` (the same fold and rows, without
  the read first);
- reads: :meth:`Store.read` (one named query, its own short transaction),
  :meth:`Store.read_snapshot` (many queries, one snapshot: :mod:`ledger.store.reads`), and the
  few backend-neutral reads that the commands and the CLI use
  (:class:`~ledger.store.store_reads.StoreReads`);
- the views' write transactions for the projection runners: :meth:`Store.view_tables`;
- cross-process wake-ups: :attr:`Store.has_notifications`, :meth:`Store.listen`,
  :meth:`Store.listen_async` (:mod:`ledger.store.notifications`);
- retention's hooks, where a backend archives (decision 31):
  :class:`~ledger.store.archive.Archiving`;
- the schema: :mod:`ledger.store.schema`.

Every driver and eventsourcing error raised through these is a
:class:`~ledger.core.errors.LedgerError` (the backends map them by SQLSTATE or result code), so
no caller needs a driver import. Backends: :mod:`ledger.store.postgres`,
:mod:`ledger.store.sqlite`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from ledger.core.codec import DEFAULT_CODEC, REGISTERED_EVENTS, EventCodec
from ledger.core.errors import InvalidRequestError
from ledger.store.archive import Archiving
from ledger.store.listeners import ListenerBus
from ledger.store.schema import Schema
from ledger.store.store_reads import StoreReads
from ledger.views.kind import registered_events
from ledger.views.kinds import JOBS

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from ledger.core.events import JobEvent
    from ledger.core.policy import Policy
    from ledger.core.state import JobState
    from ledger.store.frozen_writers import FrozenWriter
    from ledger.store.ids import IdAdapter
    from ledger.store.notifications import AsyncListening, Listening, Topic
    from ledger.store.reads import ReadSnapshot
    from ledger.store.unit_of_work import UnitOfWork
    from ledger.store.views import ViewTables


class Store(StoreReads, Archiving, ABC):
    """A database holding one ledger: its events, its views, its schema marker."""

    backend: ClassVar[str]
    has_notifications: ClassVar[bool] = False
    """Whether other processes' commits can wake this one (:meth:`listen`); without them,
    callers poll."""
    ends_frozen_writers: ClassVar[bool] = False
    """Whether :meth:`end_frozen_writers` can end anything here (a watchdog that runs it
    is pointless otherwise)."""
    frozen_writer_bound_s: float | None = None
    """How long a writer may sit silent inside a transaction before :meth:`end_frozen_writers`
    ends it (PostgreSQL: half the idle-in-transaction timeout); ``None`` where nothing can."""
    read_only: ClassVar[bool] = False
    """Whether this store only reads (a streaming replica): every write is refused, so a
    reader must not try one (a tracked projection's catch-up)."""
    codec: EventCodec = DEFAULT_CODEC
    ids: IdAdapter
    """How this backend stores and binds ids and lists."""
    queries: Mapping[str, str]
    """This backend's named queries."""
    recorder: Any
    """The eventsourcing application recorder that appends and reads the events table."""
    _policies: tuple[Policy, ...] | None = None

    def __init__(self) -> None:
        self._committed = ListenerBus()
        self.schema = Schema(self.read, self._create_schema, lambda: self.queries)
        extra = registered_events()
        if extra:  # a registered kind's events are read and written like the ledger's own
            self.codec = EventCodec((*REGISTERED_EVENTS, *extra))

    @property
    def policies(self) -> tuple[Policy, ...]:
        """Rules that append follow-up events in the unit of work of their trigger
        (:mod:`ledger.core.policy`): by default the workflow policy, whose ``needs`` answers
        ``None`` from the event alone for every job that runs no step (and for every event of
        a step's job but its end), so a plain append reads and locks nothing more. An empty
        tuple turns policies off altogether (then no trigger is even built). Built when first
        asked for: a store that only reads never imports the workflow rules."""
        if self._policies is None:
            from ledger.core.workflows.policy import WorkflowPolicy

            self._policies = (WorkflowPolicy(),)
        return self._policies

    @policies.setter
    def policies(self, policies: tuple[Policy, ...]) -> None:
        self._policies = policies

    # --- backend hooks ----------------------------------------------------------------------

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[UnitOfWork]:
        """A write transaction; committed when the block exits normally."""

    @abstractmethod
    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run one named read-only query in a transaction of its own; rows support
        ``row["column"]``."""

    @abstractmethod
    def write_operational(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        """Run one named write of operational state (``jl_pools``: what processes report of
        themselves, not a view of the history, so no event explains it) in a transaction of
        its own; the rows it changed. Never for a view or the events: those change only in a
        unit of work."""

    @abstractmethod
    def read_snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """A consistent read-only snapshot of the events and views, for many queries."""

    @abstractmethod
    def view_tables(self) -> AbstractContextManager[ViewTables]:
        """A write transaction over the views, for the projection runners (tracked rows,
        positions, shadow tables and the swap)."""

    @abstractmethod
    def _errors_mapped(self) -> AbstractContextManager[None]:
        """Turn driver and eventsourcing errors raised inside into ledger errors."""

    @abstractmethod
    def _create_schema(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    # --- writes -----------------------------------------------------------------------------

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """A write transaction; after it commits, wake this process's idle workers if it
        may have made jobs claimable (other processes learn it from the database)."""
        with self._transaction() as uow:
            uow.policies = self.policies
            yield uow
        if uow.jobs_became_available:
            self._committed.notify()

    def append_if_unchanged(
        self, changes: Sequence[tuple[JobState, Sequence[JobEvent]]]
    ) -> dict[UUID, JobState]:
        """Append each job's events, folded from the state given, to the jobs whose stored
        state is still at that state's version, in one transaction; the new states of those
        written. A job that moved on is left out (decide again on what is stored). A backend
        may write them without reading them first (PostgreSQL:
        :mod:`ledger.store.postgres.unread_appends`)."""
        if not changes:
            return {}
        with self.unit_of_work() as uow:
            stored = uow.lock_jobs([state.job_id for state, _ in changes])
            unchanged = [
                (state.job_id, events)
                for state, events in changes
                if (now := stored.get(state.job_id)) is not None and now.version == state.version
            ]
            return uow.append([JOBS.changes(unchanged)]) if unchanged else {}

    def joining(self, connection: object, *, loop: AbstractEventLoop | None = None) -> Store:
        """This store with every unit of work and read run on ``connection``, an
        application's connection to this same database with its own transaction open, inside
        that transaction (:mod:`ledger.store.joined`). A connection of another kind, to
        another database, closed, or with no transaction to join is refused with an
        :class:`~ledger.core.errors.InvalidRequestError`. ``loop``: the event loop an async
        connection belongs to, where the backend has one (PostgreSQL)."""
        raise InvalidRequestError(
            f"a {self.backend} store cannot join an application's transaction"
        )

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (in the committing thread) after commits that may have made
        jobs claimable. It must be quick and must not raise."""
        self._committed.add(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        self._committed.remove(listener)

    def end_frozen_writers(
        self, silent_s: float | None = None, stalled_s: float | None = None
    ) -> list[FrozenWriter]:
        """End the sessions frozen inside a write (their client silent for more than
        ``silent_s``, by default :attr:`frozen_writer_bound_s`) that block other sessions,
        and a jobledger store's frozen ones silent for more than ``stalled_s`` (by default
        twice ``silent_s``) that block nobody, and report them
        (:mod:`ledger.store.frozen_writers`). Takes no table lock, so it runs while every
        writer waits. Only where :attr:`ends_frozen_writers`; elsewhere it
        ends nothing: on SQLite a frozen writer keeps the database's one write lock, and
        nothing outside that process can take it back."""
        return []

    # --- other processes' commits -----------------------------------------------------------

    def listen(self, topic: Topic, on_notify: Callable[[], None]) -> Listening:
        """Call ``on_notify()`` from a thread of its own for each notification on ``topic``
        (and after each reconnect) until closed; returns once ``LISTEN`` took effect (or
        first failed, or a few seconds passed). Only where :attr:`has_notifications`."""
        raise NotImplementedError(f"{self.backend} has no notifications: poll")

    async def listen_async(
        self,
        topic: Topic,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> AsyncListening:
        """:meth:`listen` as a task of the running event loop (``on_notify`` is called in
        the loop; then ``on_payload(payload)`` for a notification that carries one, such as
        :data:`~ledger.store.notifications.CANCELLED_PAYLOAD`). Only where
        :attr:`has_notifications`."""
        raise NotImplementedError(f"{self.backend} has no notifications: poll")

    # --- schema (see ledger.store.schema) ---------------------------------------------------

    def schema_state(self) -> tuple[set[str], str | None]:
        """The jobledger tables present and the recorded schema version (``None``: none)."""
        return self.schema.state()

    def create_missing(self) -> list[str]:
        """Run every (``IF NOT EXISTS``) schema statement; the tables that were missing."""
        created = self.schema.create_missing()
        self._start_chain()
        return created

    @contextmanager
    def schema_lock(self, wait_s: float) -> Iterator[None]:
        """Hold this database's migration lock for a schema change (``init``, ``migrate``, a
        rebuild), waiting up to ``wait_s`` for another process's to end (then
        :class:`~ledger.core.errors.DatabaseBusyError`); re-entrant. PostgreSQL: an advisory
        lock (:mod:`ledger.store.postgres.migration_lock`). SQLite needs none: each schema
        step is one ``BEGIN IMMEDIATE`` transaction, which SQLite's own write lock already
        runs one at a time."""
        yield

    def initialise(self) -> bool:
        """Create what is missing; whether anything was (:meth:`Schema.initialise`)."""
        created = self.schema.initialise()
        if created:
            self._start_chain()
        return created

    def _start_chain(self) -> None:
        """Start the history's hash chain where its table was created, if it has not started
        (:func:`ledger.store.integrity_tables.start_chain`)."""
        from ledger.store.integrity_tables import start_chain

        with self.view_tables() as tables:
            start_chain(tables)

    def check_initialised(self) -> None:
        """Raise unless this database holds this code's schema, all of it."""
        self.schema.check_initialised()
