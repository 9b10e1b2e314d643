"""The unit of work: one transaction that folds, appends and projects.

A :class:`UnitOfWork` reads (and on PostgreSQL locks) the jobs it will change, and
:meth:`UnitOfWork.append` then does the only kind of write there is: it folds the new events
onto the loaded states (:class:`~ledger.store.fold.AppendFold`, the one ``evolve``), runs the
store's policies, appends the events through the eventsourcing recorder, and writes the view
rows the fold produced, all on the same cursor. No view row changes without the event that
explains it.

Backends (:mod:`ledger.store.sqlite`, :mod:`ledger.store.postgres`) supply the SQL and the
cursor, and the store's :class:`~ledger.store.ids.IdAdapter` spells ids and lists; nothing here
knows which database it talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.core.policy import Policy, trigger_types
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.core.workflows.state import RunState
from ledger.store.fold import AppendFold
from ledger.store.ids import IdAdapter
from ledger.store.kind_reads import read_all, read_states
from ledger.store.policies import follow_policies
from ledger.store.run_reads import LoadedRun, RunReads
from ledger.store.run_rows import run_writes
from ledger.views.job_types import KIND as DEFINITIONS
from ledger.views.job_types import decode_definition_row
from ledger.views.kind import Change, StateKind
from ledger.views.queue import decode_state, queue_update_row, queue_values
from ledger.views.rate_buckets import RateBucket, bucket_of_row
from ledger.views.schedules import schedule_of_row
from ledger.views.writes import ViewWrite

if TYPE_CHECKING:
    from ledger.core.schedules.state import ScheduleState

AnyKind = StateKind[Any, Any]
K = TypeVar("K")
S = TypeVar("S")


class EventRow(NamedTuple):
    """One event to append, as the events table stores it: the fields of eventsourcing's
    ``StoredEvent``, read the same way, but a tuple (a frozen dataclass's ``__init__`` cost
    twice the event's encoding, and a COPY sends a tuple as it is)."""

    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


class LoadedJob(NamedTuple):
    """A job read in a unit of work: its state and its queue position (first event's id)."""

    state: JobState
    enqueue_seq: int


class UnitOfWork(RunReads, ABC):
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

    # --- backend hooks ---------------------------------------------------------------------

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]:
        """Run a named query on this transaction's cursor; rows indexable by column name."""

    def _fetch_jobs(self, query: str, params: dict[str, Any]) -> list[LoadedJob]:
        """Run a named queue query returning (job_id, enqueue_seq, state) rows."""
        return [
            LoadedJob(decode_state(row["state"]), row["enqueue_seq"])
            for row in self._rows(query, params)
        ]

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
    def _write_queue(self, inserts: list[tuple[Any, ...]], updates: list[dict[str, Any]]) -> None:
        """Insert new jobs' rows (values in :data:`ledger.views.queue.COLUMNS` order)
        and update the others (``queue_update_row``)."""

    @abstractmethod
    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        """Run projection writes in order (consecutive writes of one query may be batched)."""

    @abstractmethod
    def _notify_jobs_available(self) -> None:
        """Tell other processes, at commit, that jobs may be claimable."""

    @abstractmethod
    def _notify_jobs_cancelled(self) -> None:
        """Tell other processes, at commit, that leased jobs were cancelled (their pools
        stop the handlers)."""

    @abstractmethod
    def serialise_appends(self) -> None:
        """Block other appenders until commit, before reading what an append must not race."""

    # --- reads ------------------------------------------------------------------------------

    def _remember(self, loaded: list[LoadedJob]) -> list[JobState]:
        for item in loaded:
            self._jobs[item.state.job_id] = item
        return [item.state for item in loaded]

    def lock_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]:
        """The current states of ``job_ids`` that exist, locked until commit."""
        if not job_ids:
            return {}
        keys = self._ids.keys(set(job_ids))
        states = self._remember(self._fetch_jobs("queue_lock", {"job_ids": keys}))
        return {state.job_id: state for state in states}

    def claimable(
        self,
        now: datetime,
        types: Sequence[str] | None,
        limit: int,
        queues: Sequence[str] | None = None,
        *,
        full_types: Iterable[str] = (),
        full_orgs: Iterable[tuple[str, str]] = (),
        taken: Iterable[UUID] = (),
    ) -> list[JobState]:
        """Due pending jobs in fair claim order (round-robin across orgs), up to ``limit``,
        locked (others' locks skipped); of ``types`` and in ``queues`` only, where given (a
        job without a queue is in ``DEFAULT_QUEUE``). Left out: jobs of ``full_types``, of
        the ``full_orgs`` (type, org) pairs (``""`` is no org) and ``taken``.

        The rows carry their types' definitions: :meth:`states` of the claimed jobs' types
        then asks nothing more of the database."""
        params: dict[str, Any] = {
            "now": to_us(now),
            "limit": limit,
            "full_types": self._ids.values(sorted(full_types)),
            "full_orgs": self._ids.values(sorted(f"{t}\x1f{o}" for t, o in full_orgs)),
            "taken": self._ids.keys(taken),
        }
        query = "queue_claim"
        if types is not None:
            params["types"] = self._ids.values(types)
            query += "_types"
        if queues is not None:
            params["queues"] = self._ids.values(queues)
            query += "_queues"
        loaded: list[LoadedJob] = []
        definitions = self._known.setdefault(DEFINITIONS, {})
        for row in self._rows(query, params):
            state = decode_state(row["state"])
            loaded.append(LoadedJob(state, row["enqueue_seq"]))
            # The queries skip paused queues and rate keys without a token; a limited type's
            # jobs still need counting against their bucket (ledger.api.rate_room). Kept
            # across the claim's asks (the concurrency step may ask again).
            if row["rate_limited"]:
                self.rate_limited.add(state.job_id)
            blob = row["definition"]
            if blob is not None and state.job_type not in definitions:
                definitions[state.job_type] = decode_definition_row(blob, row["definition_version"])
        return self._remember(loaded)

    def live_leases(self, job_types: Sequence[str]) -> dict[tuple[str, str], int]:
        """Live leases (status ``leased``) per (type, org) of ``job_types``; ``""`` is no
        org. Counted in this transaction, after :meth:`lock_limit_keys`."""
        if not job_types:
            return {}
        rows = self._rows("queue_live_leases", {"types": self._ids.values(job_types)})
        return {(row["job_type"], row["org"]): row["n"] for row in rows}

    def lock_limit_keys(self, keys: Sequence[str]) -> None:
        """Serialise, until commit, the claims of these limited keys (sorted by the caller,
        so two claims never wait for each other's). SQLite: nothing to do, its writers are
        already serialised by BEGIN IMMEDIATE."""

    def loaded(self, job_id: UUID) -> JobState | None:
        """A job's state as this unit of work last read or folded it."""
        return self._loaded_state(job_id)

    def expired_leases(self, now: datetime, limit: int) -> list[JobState]:
        """Leased jobs whose lease ended strictly before ``now``, oldest first, locked
        (rows locked by another transaction skipped). A deferred reap pushed its job's lease
        out (``job_reap_deferred``), so it is left out until that lease ends."""
        params = {"now": to_us(now), "limit": limit}
        return self._remember(self._fetch_jobs("queue_expired_leases", params))

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

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an error inside rolls back only what was done inside, and
        is raised as a ledger error; the unit of work goes on as if the block never ran."""
        saved = self._remembered()
        try:
            with self._savepoint():
                yield
        except BaseException:
            self._restore(saved)
            raise

    def _remembered(self) -> dict[str, Any]:
        """What the unit of work knows that a rolled-back savepoint must undo: the states
        it folded, and whether a NOTIFY (rolled back too) has been sent."""
        return {
            "_jobs": dict(self._jobs),
            "_known": {kind: dict(states) for kind, states in self._known.items()},
            "_runs": dict(self._runs),
            "_run_locks": set(self._run_locks),
            "jobs_became_available": self.jobs_became_available,
            "leased_jobs_cancelled": self.leased_jobs_cancelled,
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        for name, value in saved.items():
            setattr(self, name, value)

    @abstractmethod
    def _savepoint(self) -> AbstractContextManager[None]: ...

    def set_lock_timeout(self, seconds: float) -> None:
        """Wait at most ``seconds`` for any lock from now until commit, where the backend
        supports it (SQLite: no; its writers are already serialised by BEGIN IMMEDIATE)."""

    def leased_by_prefix(self, prefix: str) -> list[JobState]:
        """Leased jobs whose worker id starts with ``prefix``, locked."""
        return self._remember(self._fetch_jobs("queue_leased_by_prefix", {"prefix": prefix}))

    def find_idempotent(self, job_type: str, org: str | None, key: str) -> JobState | None:
        params = {"job_type": job_type, "org": org or "", "idempotency_key": key}
        found = self._remember(self._fetch_jobs("queue_find_idempotent", params))
        return found[0] if found else None

    def find_live_subject(self, source_id: str, uri: str) -> JobState | None:
        params = {"source_id": source_id, "uri": uri}
        found = self._remember(self._fetch_jobs("queue_find_live_subject", params))
        return found[0] if found else None

    def state(self, kind: StateKind[K, S], key: K) -> S | None:
        """The state of ``kind``'s ``key`` as this unit of work last read or wrote it (read
        from the kind's view if it has not): ``None`` if there is none."""
        return self.states(kind, [key]).get(key)

    def states(self, kind: StateKind[K, S], keys: Sequence[K]) -> dict[K, S]:
        """The states of those of ``keys`` that exist (:meth:`state`), by key, in the order
        asked; read in one query where the kind has one for many keys (job types)."""
        known = self._known.setdefault(kind, {})
        wanted = [key for key in dict.fromkeys(keys) if key not in known]
        if wanted:
            known.update(self._fetch_states(kind, wanted))
        return {key: known[key] for key in keys if key in known}

    def _fetch_states(self, kind: AnyKind, keys: Sequence[Any]) -> dict[Any, Any]:
        """Read the states of ``keys`` from ``kind``'s view (those that exist), by key."""
        return read_states(kind, keys, self._rows, self._ids)

    def all_states(self, kind: StateKind[K, S]) -> list[S]:
        """Every state of ``kind``, read now (and remembered), in its ``all`` query's
        order."""
        found = read_all(kind, lambda query: self._rows(query, {}))
        if kind.key_of is not None:
            key_of = kind.key_of
            self._known.setdefault(kind, {}).update((key_of(state), state) for state in found)
        return found

    def lock_rate_types(self, job_types: Sequence[str]) -> None:
        """Hold off other claims of ``job_types`` until commit, before reading their buckets
        (SQLite: nothing to do, ``BEGIN IMMEDIATE`` already serialises writers)."""

    def rate_buckets(self, job_types: Sequence[str]) -> list[RateBucket]:
        """The rate buckets of ``job_types`` (every key of each)."""
        params = {"job_types": self._ids.values(job_types)}
        return [bucket_of_row(row) for row in self._rows("rate_buckets_of_types", params)]

    def due_schedules(self, now_us: int, limit: int) -> list[ScheduleState]:
        """The active schedules whose next slot is at or before ``now_us``, soonest first."""
        rows = self._rows("schedules_due", {"now": now_us, "limit": limit})
        return [schedule_of_row(row) for row in rows]

    def sync_state_rows(self, source_id: str) -> dict[str, str | None]:
        """``{uri: revision}`` of every sync-state row of one source, read in this unit of
        work (a poll diffs against what its own transaction sees)."""
        rows = self._rows("sync_state_of_source", {"source_id": source_id})
        return {row["uri"]: row["revision"] for row in rows}

    # --- the one write ----------------------------------------------------------------------

    def append(self, changes: Sequence[Change]) -> dict[UUID, JobState]:
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

    def _write_states(self, changed: Mapping[AnyKind, Mapping[Any, Any]]) -> None:
        """The rows of the plainly folded kinds' changed states (their ``upsert``: a stream
        no view folds has none), remembered; a state that wakes workers (a resumed queue)
        tells other processes at commit."""
        for kind, states in changed.items():
            row = kind.row
            if kind.upsert and row is not None:
                writes = [ViewWrite(kind.upsert, row(state)) for state in states.values()]
                self._execute_writes(writes)
            self._known.setdefault(kind, {}).update(states)
            wakes = kind.wakes
            woken = wakes is not None and any(wakes(state) for state in states.values())
            if woken and not self.jobs_became_available:
                self._notify_jobs_available()
                self.jobs_became_available = True

    def _notify(self, fold: AppendFold) -> None:
        """Tell other processes, once per transaction each, that jobs may be claimable and
        that leased jobs were cancelled."""
        if fold.makes_claimable and not self.jobs_became_available:
            self._notify_jobs_available()
            self.jobs_became_available = True
        if fold.cancels_leased and not self.leased_jobs_cancelled:
            self._notify_jobs_cancelled()
            self.leased_jobs_cancelled = True

    def _loaded_state(self, job_id: UUID) -> JobState | None:
        loaded = self._jobs.get(job_id)
        return loaded.state if loaded is not None else None

    def _loaded_run(self, run_id: UUID) -> RunState | None:
        loaded = self._runs.get(run_id)
        return loaded.state if loaded is not None else None

    def _write_run_rows(self, runs: dict[UUID, RunState]) -> None:
        """Each changed run's row and its changed steps' (:func:`run_writes`)."""
        self._execute_writes(run_writes(runs, self._runs, self._ids))

    def _write_queue_rows(
        self, states: dict[UUID, JobState], first_positions: dict[UUID, int]
    ) -> None:
        inserts: list[tuple[Any, ...]] = []
        updates: list[dict[str, Any]] = []
        for job_id, state in states.items():
            key = self._ids.key(job_id)
            known = self._jobs.get(job_id)
            if known is None:
                seq = first_positions[job_id]
                inserts.append(queue_values(state, seq, key))
            else:
                seq = known.enqueue_seq
                updates.append(queue_update_row(state, key))
            self._jobs[job_id] = LoadedJob(state, seq)
        self._write_queue(inserts, updates)
