"""The unit of work: one transaction that folds, appends and projects.

A :class:`UnitOfWork` reads (and on PostgreSQL locks) the jobs it will change, and
:meth:`UnitOfWork.append` then does the only kind of write there is: it folds the new events
onto the loaded states (:class:`~ledger.store.fold.AppendFold`, the one ``evolve``), runs the
store's policies, appends the events through the eventsourcing recorder, and writes the view
rows the fold produced, all on the same cursor. No view row changes without the event that
explains it.

Its parts, each a mixin of its own module, share the states this unit of work read or folded
(set up in :meth:`UnitOfWork.__init__`):

- the reads of the jobs an append folds onto, and what a claim's limits count:
  :class:`~ledger.store.job_reads.JobReads`;
- the reads of workflow runs, under their release locks:
  :class:`~ledger.store.run_reads.RunReads`;
- the reads of the other views (each kind's states, the due schedules, sync state):
  :class:`~ledger.store.state_reads.StateReads`;
- the view rows an append writes, and the wake-ups at commit:
  :class:`~ledger.store.view_row_writes.ViewRowWrites`;
- nested transactions, whose rollback the unit of work forgets too:
  :class:`~ledger.store.savepoints.Savepoints`.

Backends (:mod:`ledger.store.sqlite`, :mod:`ledger.store.postgres`) supply the SQL and the
cursor, and the store's :class:`~ledger.store.ids.IdAdapter` spells ids and lists; nothing here
knows which database it talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.core.policy import Policy, trigger_types
from ledger.core.state import JobState
from ledger.store.fold import AppendFold
from ledger.store.ids import IdAdapter
from ledger.store.job_reads import JobReads, LoadedJob
from ledger.store.policies import follow_policies
from ledger.store.run_reads import LoadedRun, RunReads
from ledger.store.savepoints import Savepoints
from ledger.store.state_reads import AnyKind, StateReads
from ledger.store.view_row_writes import ViewRowWrites
from ledger.views.kind import Appended


class EventRow(NamedTuple):
    """One event to append, as the events table stores it: the fields of eventsourcing's
    ``StoredEvent``, read the same way, but a tuple (a frozen dataclass's ``__init__`` cost
    twice the event's encoding, and a COPY sends a tuple as it is)."""

    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


class UnitOfWork(JobReads, RunReads, StateReads, ViewRowWrites, Savepoints, ABC):
    """One transaction: read what will change, decide elsewhere, then :meth:`append`."""

    policies: tuple[Policy, ...] = ()
    """The store's policies (:mod:`ledger.store.policies`), set by :meth:`Store.unit_of_work`."""

    def __init__(self, codec: EventCodec, ids: IdAdapter) -> None:
        self._codec = codec
        self._ids = ids
        self._jobs: dict[UUID, LoadedJob] = {}
        self._known: dict[AnyKind, dict[Any, Any]] = {}
        """The states of the plainly folded kinds (job types, tokens, …) this unit of work
        read or wrote, by kind and key."""
        self._runs: dict[UUID, LoadedRun] = {}
        self._run_locks: set[UUID] = set()
        self.jobs_became_available = False
        self.leased_jobs_cancelled = False
        self.rate_limited: set[UUID] = set()
        """The jobs the last :meth:`claimable` found whose type is rate limited."""

    # --- backend hooks (more in ViewRowWrites and Savepoints) -------------------------------

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]:
        """Run a named query on this transaction's cursor; rows indexable by column name."""

    @abstractmethod
    def _insert_stored_events(
        self, stored: list[EventRow], *, positions_needed: bool
    ) -> Sequence[int] | None:
        """Append through the recorder; with ``positions_needed``, return the notification
        ids in order (a backend may skip fetching them otherwise)."""

    def _write_phase(self, new_jobs: int) -> AbstractContextManager[None]:
        """Around an append's writes of ``new_jobs`` new jobs (and their events): a backend
        may batch their round trips, or bulk-load a large batch."""
        return nullcontext()

    @abstractmethod
    def serialise_appends(self) -> None:
        """Block other appenders until commit, before reading what an append must not race."""

    def set_lock_timeout(self, seconds: float) -> None:
        """Wait at most ``seconds`` for any lock from now until commit, where the backend
        supports it (SQLite: no; its writers are already serialised by BEGIN IMMEDIATE)."""

    # --- the events -------------------------------------------------------------------------

    def histories(self, originator_ids: Sequence[UUID]) -> dict[UUID, list[Record]]:
        """Every event of each stream, in order, read in this transaction."""
        if not originator_ids:
            return {}
        keys = self._ids.keys(set(originator_ids))
        found: dict[UUID, list[Record]] = {i: [] for i in originator_ids}
        for originator_id, version, topic, state in self._fetch_events(keys):
            found[originator_id].append(
                Record(originator_id, version, self._codec.decode(topic, state))
            )
        return found

    @abstractmethod
    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        """Run ``events_of_streams``."""

    # --- the one write ----------------------------------------------------------------------

    def append(self, changes: Sequence[Appended]) -> dict[UUID, JobState]:
        """Fold, append and project ``changes`` (events of any kind of state: see
        :mod:`ledger.views.kind`) in this transaction; the jobs' new states.

        Every job changed must have been read in this unit of work, unless its first event is
        ``job_enqueued``; every run read under its release lock (:meth:`lock_runs`), unless
        its first event is ``workflow_submitted``. The changes are folded in their kinds' fold
        order (:data:`ledger.views.registry.KINDS`), whatever order they come in: job
        types before jobs (a ``job_type_defined`` precedes the jobs enqueued under it), runs
        before jobs (a released step's ``workflow_step_released`` precedes its job's
        ``job_enqueued``).
        """
        fold = AppendFold(
            self._loaded_state,
            triggers=[] if self.policies else None,
            trigger_types=trigger_types(self.policies),
            loaded_run=self._loaded_run,
            known=self.state,
        )
        fold.fold(changes)
        asked: list[UUID] | None = None
        if fold.triggers:
            asked = list(fold.states)  # follow-ups' jobs are not the caller's to see
            follow_policies(self.policies, fold.triggers, fold, self)
        if not fold.records:
            return {}
        encode = self._codec.encode
        stored = [
            EventRow(originator_id, version, *encode(event))
            for originator_id, version, event in fold.records
        ]
        # Only new jobs need positions (their enqueue_seq); without them a backend need not
        # wait for the insert's result before sending the view writes.
        new_jobs = sum(job_id not in self._jobs for job_id in fold.states)
        with self._write_phase(new_jobs):
            positions = self._insert_stored_events(stored, positions_needed=new_jobs > 0)
            first_positions: dict[UUID, int] = {}
            if positions is not None:
                first_positions = {
                    originator_id: position
                    for (originator_id, version, _), position in zip(
                        fold.records, positions, strict=True
                    )
                    if version == 1
                }
            self._write_queue_rows(fold.states, first_positions)
            if fold.view_writes:
                self._execute_writes(fold.view_writes)
            self._notify(fold)
            if fold.changed:
                self._write_states(fold.changed)
            if fold.runs:
                self._write_run_rows(fold.runs)
        return fold.states if asked is None else {job_id: fold.states[job_id] for job_id in asked}
