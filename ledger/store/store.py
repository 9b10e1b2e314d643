"""The store: one database holding one ledger, read and written through a few seams.

- writes: :meth:`Store.unit_of_work` (:mod:`ledger.store.unit_of_work`), the only way anything
  is written; after a commit that may have made jobs claimable it wakes this process's
  listeners (:mod:`ledger.store.listeners`);
- reads: :meth:`Store.read` (one named query, its own short transaction),
  :meth:`Store.read_snapshot` (many queries, one snapshot: :mod:`ledger.store.reads`), and the
  few backend-neutral reads below that the commands and the CLI use;
- the views' write transactions for the projection runners: :meth:`Store.view_tables`;
- cross-process wake-ups: :attr:`Store.has_notifications`, :meth:`Store.listen`,
  :meth:`Store.listen_async` (:mod:`ledger.store.notifications`);
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
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from uuid import UUID

from ledger.core.codec import DEFAULT_CODEC, REGISTERED_EVENTS, EventCodec, Record
from ledger.core.errors import InvalidRequestError
from ledger.core.events import Event, JobEvent
from ledger.core.times import from_us
from ledger.store.listeners import ListenerBus
from ledger.store.schema import Schema
from ledger.views.kind import registered_events

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop
    from datetime import datetime

    from ledger.core.policy import Policy
    from ledger.core.state import JobState
    from ledger.store.archive import ArchiveMove, ArchiveUnit
    from ledger.store.frozen_writers import FrozenWriter
    from ledger.store.ids import IdAdapter
    from ledger.store.notifications import AsyncListening, Listening, Topic
    from ledger.store.reads import ReadSnapshot
    from ledger.store.replica import ReplicaLag
    from ledger.store.unit_of_work import UnitOfWork
    from ledger.store.views import ViewTables
    from ledger.views.dead_letters import DeadLetter
    from ledger.views.kind import StateKind
    from ledger.views.rate_buckets import RateBucket
    from ledger.views.sync_state import Source, SyncState

K = TypeVar("K")
S = TypeVar("S")

ArchivedEvent = Callable[[list[UUID], dict[str, int]], Event]
"""Builds a retention batch's event from the jobs it moved and the rows moved per table."""


class Store(ABC):
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

    # --- retention (decision 31) ------------------------------------------------------------

    @property
    def archive_where(self) -> str | None:
        """Where :meth:`move_to_archive` moves jobs (``None``: this backend cannot yet)."""
        return None

    def move_to_archive(
        self,
        job_versions: Mapping[UUID, int],
        event_for: ArchivedEvent,
        *,
        now: datetime | None = None,
    ) -> ArchiveMove:
        """Move finished jobs, each still at the version it was chosen at, out of the hot
        tables into the archive, with the event ``event_for`` builds in the transaction that
        removes them; jobs that changed meanwhile stay. ``now`` is the run's time (PostgreSQL
        detaches only months wholly before it)."""
        from ledger.store.archive import archive_unsupported

        raise archive_unsupported(self.backend)

    def ensure_partitions(self, now: datetime, ahead: int = 3) -> list[str]:
        """Make the archive units of ``now``'s month and ``ahead`` more where the backend
        archives by month (PostgreSQL: the events table's partitions); those made."""
        return []

    def archive_units(self, job_versions: Mapping[UUID, int], now: datetime) -> list[ArchiveUnit]:
        """The units a run moves whole, if this backend moves jobs by unit (PostgreSQL: the
        past months of the events table), and whether each would move now."""
        return []

    def table_sizes(self) -> dict[str, int]:
        """Rows per table that retention moves, hot and archived, and bytes on disk."""
        return {}

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

    # --- reads ------------------------------------------------------------------------------

    def get_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]:
        """The current states of those of ``job_ids`` that exist, read without locks."""
        from ledger.views.queue import decode_state

        if not job_ids:
            return {}
        rows = self.read("queue_get_many", {"job_ids": self.ids.keys(job_ids)})
        states = [decode_state(row["state"]) for row in rows]
        return {state.job_id: state for state in states}

    def get_job(self, job_id: UUID) -> JobState | None:
        """One job's current state (from the queue view), or ``None``."""
        return self.get_jobs([job_id]).get(job_id)

    def sync_state(self, source_id: str) -> list[SyncState]:
        """Every sync-state row of one source, by URI."""
        return [
            _sync_state_of(row)
            for row in self.read("sync_state_of_source", {"source_id": source_id})
        ]

    def sync_state_of_org(self, source_id: str, org: str) -> list[SyncState]:
        """The sync-state rows of one source whose subject only ``org``'s jobs touched (the
        view has no org: a subject another org's job also synced is left out)."""
        rows = self.read("sync_state_of_source_of_org", {"source_id": source_id, "org": org})
        return [_sync_state_of(row) for row in rows]

    def sources(self, *, org: str | None = None, source_id: str | None = None) -> list[Source]:
        """Each source known to the sync-state view or to a job's subject: its URIs, last
        ingestion and jobs by status (of ``org``'s subjects and jobs only, if given), by
        source id; ``source_id``: only that one."""
        from ledger.views.sync_state import Source

        if org is None:
            summary = self.read("sources_summary")
            counts = self.read("source_job_counts", {"source_id": source_id})
        else:
            summary = self.read("sources_summary_of_org", {"org": org})
            counts = self.read("source_job_counts_of_org", {"org": org, "source_id": source_id})
        found: dict[str, Source] = {}
        for row in summary:
            if source_id is None or row["source_id"] == source_id:
                last = row["last_ingested_at"]
                found[row["source_id"]] = Source(
                    row["source_id"], int(row["uris"]), None if last is None else from_us(last), {}
                )
        for row in counts:
            source = found.setdefault(row["source_id"], Source(row["source_id"], 0, None, {}))
            source.jobs[str(row["status"])] = int(row["n"])
        return [found[key] for key in sorted(found)]

    def dead_letters(
        self, job_type: str | None = None, *, org: str | None = None
    ) -> list[DeadLetter]:
        """Dead jobs (optionally of one type, of one org), oldest death first."""
        from ledger.views.dead_letters import DeadLetter
        from ledger.views.queue import decode_state

        if org is not None:
            rows = self.read("dead_letters_of_org", {"job_type": job_type, "org": org})
        elif job_type is None:
            rows = self.read("dead_letters_all")
        else:
            rows = self.read("dead_letters_of_type", {"job_type": job_type})
        letters = []
        for row in rows:
            snapshot = decode_state(row["snapshot"])
            assert snapshot.last_error is not None and snapshot.finished_at is not None
            letters.append(
                DeadLetter(
                    job_id=snapshot.job_id,
                    job_type=snapshot.job_type,
                    dead_at=snapshot.finished_at,
                    failure=snapshot.last_error,
                    snapshot=snapshot,
                )
            )
        return letters

    def states(self, kind: StateKind[Any, S]) -> list[S]:
        """Every state of ``kind`` its view holds (job types, tokens, schedules, source polls,
        queue states, a registered kind's), in its ``all`` query's order."""
        from ledger.store.kind_reads import read_all

        return read_all(kind, self.read)

    def state(self, kind: StateKind[K, S], key: K) -> S | None:
        """One state of ``kind`` from its view (``None``: there is none)."""
        from ledger.store.kind_reads import read_states

        found: dict[K, S] = read_states(kind, [key], self.read, self.ids)
        return found.get(key)

    def rate_buckets(self) -> list[RateBucket]:
        """Every rate-limit key's bucket, from the rate-bucket view."""
        from ledger.views.rate_buckets import bucket_of_row

        return [bucket_of_row(row) for row in self.read("rate_buckets_all")]

    def count_by_status(self) -> dict[str, int]:
        """How many jobs the queue view holds in each status."""
        return {row["status"]: row["n"] for row in self.read("queue_counts")}

    def history(self, originator_id: UUID) -> list[Record]:
        """Every event of one stream (a job, or a job type's definitions), in order."""
        with self._errors_mapped():
            stored_events = self.recorder.select_events(originator_id)
        return [
            Record(
                stored.originator_id,
                stored.originator_version,
                self.codec.decode(stored.topic, stored.state),
            )
            for stored in stored_events
        ]

    def job_events(self, job_id: UUID) -> Iterator[JobEvent]:
        """One job's events, in order."""
        for record in self.history(job_id):
            assert isinstance(record.event, JobEvent)
            yield record.event

    def replica_lag(self) -> ReplicaLag | None:
        """How far behind its primary this store's database is, if it is a replica
        (:mod:`ledger.store.replica`); ``None`` for a ledger's own database."""
        return None

    def head_position(self) -> int:
        """The notification id of the newest event (0 when there is none)."""
        with self._errors_mapped():
            return int(self.recorder.max_notification_id() or 0)

    # --- schema (see ledger.store.schema) ---------------------------------------------------

    def schema_state(self) -> tuple[set[str], str | None]:
        """The jobledger tables present and the recorded schema version (``None``: none)."""
        return self.schema.state()

    def create_missing(self) -> list[str]:
        """Run every (``IF NOT EXISTS``) schema statement; the tables that were missing."""
        return self.schema.create_missing()

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
        return self.schema.initialise()

    def check_initialised(self) -> None:
        """Raise unless this database holds this code's schema, all of it."""
        self.schema.check_initialised()


def _sync_state_of(row: Mapping[str, Any]) -> SyncState:
    """One ``jl_sync_state`` row as its value."""
    from ledger.views.sync_state import SyncState

    return SyncState(
        source_id=row["source_id"],
        uri=row["uri"],
        revision=row["revision"],
        content_hash=row["content_hash"],
        last_seen_at=from_us(row["last_seen_at"]),
        last_ingested_at=from_us(row["last_ingested_at"]),
    )
